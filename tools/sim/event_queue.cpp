#include "sim/event_queue.h"

namespace tellus::sim {

void EventQueue::push(Event event) {
  event.sequence = nextSequence_++;
  heap_.push(event);
}

Event EventQueue::pop() {
  Event event = heap_.top();
  heap_.pop();
  return event;
}

}  // namespace tellus::sim
