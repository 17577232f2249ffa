/* bench_engine.h - the engine half of `hearth bench`. */
#ifndef HEARTH_CLI_BENCH_ENGINE_H
#define HEARTH_CLI_BENCH_ENGINE_H

#include "engine/sampler.h"
#include "lib/session.h"

/* Run n_req (at least n_par) requests of n_prompt random ids -> n_gen
 * tokens through a fresh engine of n_par slots on s, the next requests
 * waiting while the slots are full; print the result lines. sp: their
 * sampling (NULL: greedy; request i seeded sp->seed + i). Returns 0 or 1
 * (err filled). */
int cli_bench_engine(hearth_session *s, int n_par, int n_req, int n_prompt, int n_gen, const hearth_sampling *sp,
                     hearth_err *err);

/* --repeat: per rep, a fresh prompt twice through one engine (cold, then
 * served from the prefix cache); prints both TTFTs. */
int cli_bench_prefix(hearth_session *s, int n_prompt, int n_gen, int reps, hearth_err *err);

#endif
