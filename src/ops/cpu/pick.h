/* pick.h - the pick op for one logit row on the host (ops/ops.h defines the
 * rule); the CPU backend runs it per row, tests use it as the reference. */
#ifndef HEARTH_OPS_CPU_PICK_H
#define HEARTH_OPS_CPU_PICK_H

#include "ops/ops.h"

void hearth_pick_row(hearth_pick *out, const float *x, int vocab, const hearth_pick_params *p);

#endif
