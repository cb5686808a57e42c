#include "harness/fuzz.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/stubs/logging.h>

#include <cstdlib>
#include <iostream>
#include <iterator>
#include <limits>
#include <string_view>

namespace tellus::harness {

namespace pbuf = google::protobuf;

namespace {
// Nested messages deeper than this are left empty (recursive types would never end).
constexpr int kMaxDepth = 4;
}  // namespace

FuzzSettings fuzzSettings(const std::string& name, double defaultSeconds) {
  // Mutated messages make protobuf log every invalid UTF-8 string it parses: thousands of
  // lines a second that would slow the fuzzing down and bury its report.
  pbuf::SetLogHandler(nullptr);
  FuzzSettings s;
  s.seed = static_cast<std::uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  double seconds = defaultSeconds;
  if (const char* env = std::getenv("TELLUS_FUZZ_SEED"); env && *env) s.seed = std::strtoull(env, nullptr, 10);
  if (const char* env = std::getenv("TELLUS_FUZZ_SECONDS"); env && *env) {
    const double parsed = std::strtod(env, nullptr);
    if (parsed > 0) seconds = parsed;
  }
  s.duration = std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000));
  std::cerr << "fuzz " << name << ": seed " << s.seed << ", " << seconds << " s (TELLUS_FUZZ_SEED=" << s.seed
            << " to replay, TELLUS_FUZZ_SECONDS to run longer)\n";
  return s;
}

std::string Mutator::randomBytes(std::size_t maxBytes) {
  std::string out(below(maxBytes + 1), '\0');
  for (char& c : out) c = static_cast<char>(below(256));
  return out;
}

std::uint64_t Mutator::interestingNumber() {
  switch (below(8)) {
    case 0: return 0;
    case 1: return 1;
    case 2: return std::numeric_limits<std::uint64_t>::max();
    case 3: return std::numeric_limits<std::uint32_t>::max();
    case 4: return static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    case 5: return static_cast<std::uint64_t>(std::numeric_limits<std::int32_t>::max()) + below(3) - 1;
    case 6: return (std::uint64_t{1} << below(64)) + below(3) - 1;
    default: return below(1000);
  }
}

std::string Mutator::hostileString() {
  static const char* const kFixed[] = {"",
                                       "../../x",
                                       "..",
                                       ".",
                                       "/",
                                       "/etc/passwd",
                                       "a/b",
                                       "a\\b",
                                       "-rf",
                                       "x y",
                                       "$(id)",
                                       "`id`",
                                       "%s%s%n",
                                       "{a: [b",
                                       "\n- x: y\n",
                                       "\xff\xfe\xc3\x28",
                                       "\xe2\x80\xae",
                                       "job-0000000001",
                                       "job-99999999999999999999",
                                       "127.0.0.1:1",
                                       "[::1]:0",
                                       "host:99999"};
  const std::size_t pick = below(std::size(kFixed) + 3);
  if (pick < std::size(kFixed)) return kFixed[pick];
  if (pick == std::size(kFixed)) return std::string("a\0b", 3);
  if (pick == std::size(kFixed) + 1) return std::string(1 + below(100000), 'x');
  return randomBytes(32);
}

std::string Mutator::mutate(std::string s) {
  const std::size_t edits = 1 + below(8);
  for (std::size_t e = 0; e < edits; ++e) {
    switch (below(8)) {
      case 0:
        if (!s.empty()) s[below(s.size())] ^= static_cast<char>(1u << below(8));
        break;
      case 1:
        if (!s.empty()) s[below(s.size())] = static_cast<char>(below(256));
        break;
      case 2:
        s.insert(below(s.size() + 1), randomBytes(16));
        break;
      case 3:
        if (!s.empty()) {
          const std::size_t at = below(s.size());
          s.erase(at, 1 + below(s.size() - at));
        }
        break;
      case 4:
        if (!s.empty()) {
          const std::size_t at = below(s.size());
          const std::string chunk = s.substr(at, 1 + below(std::min<std::size_t>(64, s.size() - at)));
          s.insert(below(s.size() + 1), chunk);
        }
        break;
      case 5:
        s.resize(below(s.size() + 1));
        break;
      case 6: {
        // An interesting integer over 1, 2, 4 or 8 bytes, either byte order.
        const std::size_t width = std::size_t{1} << below(4);
        if (s.size() < width) break;
        const std::size_t at = below(s.size() - width + 1);
        const std::uint64_t v = interestingNumber();
        const bool big = chance(0.5);
        for (std::size_t i = 0; i < width; ++i) {
          const std::size_t shift = 8 * (big ? width - 1 - i : i);
          s[at + i] = static_cast<char>((v >> shift) & 0xff);
        }
        break;
      }
      default: {
        const std::string text = hostileString().substr(0, 256);
        s.insert(below(s.size() + 1), text);
        break;
      }
    }
  }
  return s;
}

std::string Mutator::stringValue(const std::vector<std::string>& dictionary) {
  const std::size_t pick = below(10);
  if (pick < 5 && !dictionary.empty()) return dictionary[below(dictionary.size())];
  if (pick < 8) return hostileString();
  if (pick < 9 && !dictionary.empty()) return mutate(dictionary[below(dictionary.size())]);
  return randomBytes(24);
}

void Mutator::setField(pbuf::Message& m, const pbuf::FieldDescriptor* f, const std::vector<std::string>& dictionary,
                       int depth) {
  const pbuf::Reflection* r = m.GetReflection();
  const bool repeated = f->is_repeated();
  std::size_t count = 1;
  if (repeated) {
    // Mostly a few; sometimes none; rarely huge (a hostile peer's favourite).
    const std::size_t pick = below(20);
    count = pick == 0 ? 0 : pick == 1 && depth == 0 ? 1000 + below(100000) : 1 + below(4);
    if (f->cpp_type() == pbuf::FieldDescriptor::CPPTYPE_MESSAGE || f->cpp_type() == pbuf::FieldDescriptor::CPPTYPE_STRING) {
      count = std::min<std::size_t>(count, 5000);
    }
    r->ClearField(&m, f);
  }
  auto number = [&]() -> std::uint64_t { return chance(0.5) ? below(8) : interestingNumber(); };
  for (std::size_t i = 0; i < count; ++i) {
    switch (f->cpp_type()) {
      case pbuf::FieldDescriptor::CPPTYPE_INT32: {
        const auto v = static_cast<std::int32_t>(number());
        repeated ? r->AddInt32(&m, f, v) : r->SetInt32(&m, f, v);
        break;
      }
      case pbuf::FieldDescriptor::CPPTYPE_INT64: {
        const auto v = static_cast<std::int64_t>(number());
        repeated ? r->AddInt64(&m, f, v) : r->SetInt64(&m, f, v);
        break;
      }
      case pbuf::FieldDescriptor::CPPTYPE_UINT32: {
        const auto v = static_cast<std::uint32_t>(number());
        repeated ? r->AddUInt32(&m, f, v) : r->SetUInt32(&m, f, v);
        break;
      }
      case pbuf::FieldDescriptor::CPPTYPE_UINT64: {
        const auto v = number();
        repeated ? r->AddUInt64(&m, f, v) : r->SetUInt64(&m, f, v);
        break;
      }
      case pbuf::FieldDescriptor::CPPTYPE_DOUBLE:
      case pbuf::FieldDescriptor::CPPTYPE_FLOAT: {
        static const double kDoubles[] = {0.0, -1.0, 1e308, -1e308, 1e-308, std::numeric_limits<double>::infinity(),
                                          std::numeric_limits<double>::quiet_NaN(), 0.5, 1e9};
        const double v = chance(0.5) ? kDoubles[below(std::size(kDoubles))] : static_cast<double>(below(100));
        if (f->cpp_type() == pbuf::FieldDescriptor::CPPTYPE_DOUBLE) {
          repeated ? r->AddDouble(&m, f, v) : r->SetDouble(&m, f, v);
        } else {
          const auto fv = static_cast<float>(v);
          repeated ? r->AddFloat(&m, f, fv) : r->SetFloat(&m, f, fv);
        }
        break;
      }
      case pbuf::FieldDescriptor::CPPTYPE_BOOL: {
        const bool v = chance(0.5);
        repeated ? r->AddBool(&m, f, v) : r->SetBool(&m, f, v);
        break;
      }
      case pbuf::FieldDescriptor::CPPTYPE_ENUM: {
        const pbuf::EnumDescriptor* e = f->enum_type();
        // Mostly a defined value; sometimes one no version of the proto defines.
        const int v = chance(0.8) ? e->value(static_cast<int>(below(static_cast<std::size_t>(e->value_count()))))->number()
                                  : static_cast<int>(number());
        repeated ? r->AddEnumValue(&m, f, v) : r->SetEnumValue(&m, f, v);
        break;
      }
      case pbuf::FieldDescriptor::CPPTYPE_STRING: {
        std::string v = stringValue(dictionary);
        repeated ? r->AddString(&m, f, std::move(v)) : r->SetString(&m, f, std::move(v));
        break;
      }
      case pbuf::FieldDescriptor::CPPTYPE_MESSAGE: {
        pbuf::Message* sub = repeated ? r->AddMessage(&m, f) : r->MutableMessage(&m, f);
        if (depth + 1 < kMaxDepth) randomizeAt(*sub, dictionary, depth + 1);
        break;
      }
    }
  }
}

void Mutator::randomizeAt(pbuf::Message& m, const std::vector<std::string>& dictionary, int depth) {
  const pbuf::Descriptor* d = m.GetDescriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    if (chance(0.25)) continue;  // leave some fields unset
    setField(m, d->field(i), dictionary, depth);
  }
}

void Mutator::randomize(pbuf::Message& m, const std::vector<std::string>& dictionary) {
  m.Clear();
  randomizeAt(m, dictionary, 0);
}

void Mutator::mutateFields(pbuf::Message& m, const std::vector<std::string>& dictionary) {
  const std::size_t changes = 1 + below(3);
  for (std::size_t c = 0; c < changes; ++c) {
    // Walk down into a random set sub-message now and then, to reach nested fields.
    pbuf::Message* target = &m;
    int depth = 0;
    while (depth + 1 < kMaxDepth && chance(0.4)) {
      const pbuf::Descriptor* d = target->GetDescriptor();
      const pbuf::Reflection* r = target->GetReflection();
      std::vector<const pbuf::FieldDescriptor*> messages;
      for (int i = 0; i < d->field_count(); ++i) {
        const auto* f = d->field(i);
        if (f->cpp_type() != pbuf::FieldDescriptor::CPPTYPE_MESSAGE) continue;
        if (f->is_repeated() ? r->FieldSize(*target, f) > 0 : r->HasField(*target, f)) messages.push_back(f);
      }
      if (messages.empty()) break;
      const auto* f = messages[below(messages.size())];
      target = f->is_repeated()
                   ? r->MutableRepeatedMessage(target, f, static_cast<int>(below(static_cast<std::size_t>(r->FieldSize(*target, f)))))
                   : r->MutableMessage(target, f);
      ++depth;
    }
    const pbuf::Descriptor* d = target->GetDescriptor();
    if (d->field_count() == 0) continue;
    const auto* f = d->field(static_cast<int>(below(static_cast<std::size_t>(d->field_count()))));
    if (chance(0.15)) {
      target->GetReflection()->ClearField(target, f);
    } else {
      setField(*target, f, dictionary, depth);
    }
  }
}

}  // namespace tellus::harness
