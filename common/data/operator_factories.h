#pragma once
// Internal: one factory per built-in operator, used by the registry in operator.cpp. A
// factory reads its params through the ParamReader (the registry calls finish() afterwards to
// reject unknown params) and must have no side effects.

#include <memory>

#include "data/operator.h"
#include "data/params.h"
#include "util/result.h"

namespace tellus::data::internal {

using OperatorFactory = Result<std::unique_ptr<Operator>> (*)(ParamReader& params, const OperatorEnv& env);

Result<std::unique_ptr<Operator>> makeIdentity(ParamReader& params, const OperatorEnv& env);
Result<std::unique_ptr<Operator>> makeGrep(ParamReader& params, const OperatorEnv& env);
Result<std::unique_ptr<Operator>> makeSort(ParamReader& params, const OperatorEnv& env);
Result<std::unique_ptr<Operator>> makeWordcountMap(ParamReader& params, const OperatorEnv& env);
Result<std::unique_ptr<Operator>> makeWordcountReduce(ParamReader& params, const OperatorEnv& env);
Result<std::unique_ptr<Operator>> makeSum(ParamReader& params, const OperatorEnv& env);
Result<std::unique_ptr<Operator>> makeSynthetic(ParamReader& params, const OperatorEnv& env);
Result<std::unique_ptr<Operator>> makeExec(ParamReader& params, const OperatorEnv& env);

}  // namespace tellus::data::internal
