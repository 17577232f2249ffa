/* train.h - the CPU backend's training ops (hearth_train_ops, ops/ops.h),
 * hearth_cpu_ops.train. */
#ifndef HEARTH_OPS_CPU_TRAIN_H
#define HEARTH_OPS_CPU_TRAIN_H

#include "ops/ops.h"

extern const hearth_train_ops hearth_cpu_train_ops;

#endif
