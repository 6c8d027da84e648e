// Umbrella header of the C target: every exported symbol carries the sw_ prefix.
#ifndef CSTALLWATCH_H
#define CSTALLWATCH_H
#include "sw_sys.h"
#include "sw_loop_state.h"
#include "sw_dispatch.h"
#include "sw_capture.h"
#include "sw_capture_fixtures.h"
#include "sw_ptrace.h"
#include "sw_unwind.h"
#include "sw_symbols.h"
#endif
