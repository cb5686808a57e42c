// The job the core's tests script: map (reads dataset `corpus`) -> reduce (`reduceTasks`
// tasks, a shuffle of the map's outputs).
#pragma once

#include "tellus.pb.h"

namespace tellus::jobcore::testing {

inline pb::JobSpec wordcountSpec(int reduceTasks) {
  pb::JobSpec spec;
  spec.set_name("wc");
  auto* map = spec.add_stages();
  map->set_name("map");
  map->set_op("wordcount.map");
  map->add_inputs()->set_dataset("corpus");
  auto* reduce = spec.add_stages();
  reduce->set_name("reduce");
  reduce->set_op("wordcount.reduce");
  reduce->set_tasks(reduceTasks);
  reduce->add_inputs()->set_stage("map");
  return spec;
}

}  // namespace tellus::jobcore::testing
