#include "core/counters.h"

namespace mrc {

#define MRC_COUNTER_INFO(name, doc) {#name, doc},
const CounterInfo kEndpointCounterInfo[kEndpointCounterCount] = {
    MRC_ENDPOINT_COUNTERS(MRC_COUNTER_INFO)};
const CounterInfo kQpCounterInfo[kQpCounterCount] = {MRC_QP_COUNTERS(MRC_COUNTER_INFO)};
const CounterInfo kPlaneCounterInfo[kPlaneCounterCount] = {MRC_PLANE_COUNTERS(MRC_COUNTER_INFO)};

QpCounters &QpCounters::operator+=(const QpCounters &o) {
#define MRC_COUNTER_ADD(name, doc) name += o.name;
    MRC_QP_COUNTERS(MRC_COUNTER_ADD)
    return *this;
}

QpCounters &QpCounters::operator-=(const QpCounters &o) {
#define MRC_COUNTER_SUB(name, doc) name -= o.name;
    MRC_QP_COUNTERS(MRC_COUNTER_SUB)
#undef MRC_COUNTER_SUB
    return *this;
}

PlaneCounters &PlaneCounters::operator+=(const PlaneCounters &o) {
    MRC_PLANE_COUNTERS(MRC_COUNTER_ADD)
    return *this;
}

}  // namespace mrc
