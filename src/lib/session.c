/* session.c - backend choice, model + tokenizer load, KV sizing. */
#include "lib/session.h"

#include "core/clock.h"
#include "core/file.h"
#include "core/log.h"
#include "engine/kv_disk.h"
#include "io/gguf.h"
#include "ops/cpu/ops_cpu.h"
#include "ops/cuda/cuda_info.h"
#ifdef HEARTH_CUDA
#include "ops/cuda/ops_cuda.h"
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

static hearth_status open_backend(hearth_session *s, const hearth_session_opts *o, const hearth_model_config *cfg,
                                  hearth_err *err) {
    int qd = cfg->n_heads * cfg->head_dim;
    int max_cols = cfg->hidden_size;
    if (qd > max_cols) max_cols = qd;
    if (cfg->intermediate_size > max_cols) max_cols = cfg->intermediate_size;
    const char *dev = hearth_session_device(o->device);
    if (!strcmp(dev, "cpu")) {
        hearth_cpu_ctx *c;
        if (s->max_tokens <= 0) s->max_tokens = 512;
        hearth_status st = hearth_cpu_ctx_new(&c, o->threads, s->max_tokens, max_cols, s->ctx, err);
        if (st != HEARTH_OK) return st;
        s->ops = &hearth_cpu_ops;
        s->ops_ctx = c;
        return HEARTH_OK;
    }
    if (!strncmp(dev, "cuda", 4) && (dev[4] == 0 || dev[4] == ':')) {
        char *end = NULL;
        long idx = dev[4] == ':' ? strtol(dev + 5, &end, 10) : 0;
        if (dev[4] == ':' && (end == dev + 5 || *end || idx < 0))
            return hearth_err_set(err, HEARTH_EINVAL, "device '%s': expected cuda:N with N a device index", dev);
#ifdef HEARTH_CUDA
        int n = hearth_cuda_device_count();
        if (idx >= n)
            return hearth_err_set(err, HEARTH_ENOENT, "device '%s': %d CUDA device%s found", dev, n, n == 1 ? "" : "s");
        hearth_cuda_ctx *c;
        /* A GPU step holds prefill chunks beside hundreds of decode rows: 8192
         * rows on a device of 70 GiB or more (vLLM's budget for such GPUs; at
         * 512 streams of 1000 / 1000 on the H200 +1.9% output and 18% less
         * TTFT p99 than 2048, notes/batching.md session 25), 2048 below. */
        if (s->max_tokens <= 0) {
            hearth_cuda_device_info info;
            int big = hearth_cuda_device_query((int)idx, &info) == 0 && info.mem_total >= (size_t)70 << 30;
            s->max_tokens = big ? 8192 : 2048;
        }
        hearth_status st = hearth_cuda_ctx_new(&c, (int)idx, s->max_tokens, max_cols, s->ctx, err);
        if (st != HEARTH_OK) return st;
        s->ops = &hearth_cuda_ops;
        s->ops_ctx = c;
        s->cuda_device = (int)idx;
        return HEARTH_OK;
#else
        return hearth_err_set(err, HEARTH_ENOTSUP, "device '%s': this build has no CUDA backend (built with CUDA=0)",
                              dev);
#endif
    }
    return hearth_err_set(err, HEARTH_EINVAL, "unknown device '%s' (expected cpu, cuda or cuda:N)", dev);
}

/* Bytes of the model's weight files: a GGUF file, or the .safetensors of a directory. */
static size_t model_file_bytes(const char *path) {
    struct stat sb;
    if (stat(path, &sb) != 0) return 0;
    if (!S_ISDIR(sb.st_mode)) return (size_t)sb.st_size;
    size_t n = 0;
    DIR *d = opendir(path);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        size_t len = strlen(e->d_name);
        char f[4096];
        if (len < 12 || strcmp(e->d_name + len - 12, ".safetensors")) continue;
        snprintf(f, sizeof f, "%s/%s", path, e->d_name);
        if (stat(f, &sb) == 0) n += (size_t)sb.st_size;
    }
    if (d) closedir(d);
    return n;
}

/* A device backend: refuse a model that cannot fit before uploading any of
 * it, and say what is free when an upload runs out after all. */
static hearth_status check_device_room(const hearth_session *s, const char *path, hearth_status load_st,
                                       hearth_err *err) {
    hearth_cuda_device_info info;
    if (s->ops->host_memory || hearth_cuda_device_query(s->cuda_device, &info) != 0) return load_st;
    double gib = 1073741824.0;
    if (load_st == HEARTH_ENOMEM)
        return hearth_err_wrap(err, load_st, "cuda:%d has %.2f GiB free of %.2f GiB", s->cuda_device,
                               info.mem_free / gib, info.mem_total / gib);
    size_t need = model_file_bytes(path);
    if (load_st == HEARTH_OK && need > info.mem_free)
        return hearth_err_set(err, HEARTH_ENOMEM,
                              "%s: the weights need %.2f GiB on cuda:%d, which has %.2f GiB free of %.2f GiB", path,
                              need / gib, s->cuda_device, info.mem_free / gib, info.mem_total / gib);
    return load_st;
}

static hearth_status open_tokenizer(hearth_session *s, const char *path, hearth_err *err) {
    const hearth_gguf *g = hearth_model_gguf(s->model);
    if (g) {
        const char *kind = NULL;
        size_t len;
        /* a GGUF without a vocabulary (llama.cpp's "none"): ids only */
        if (hearth_gguf_get_str(g, "tokenizer.ggml.model", &kind, &len, NULL) != HEARTH_OK || !strcmp(kind, "none"))
            return HEARTH_OK;
        return hearth_tok_load_gguf(&s->tok, g, err);
    }
    char tj[4096], tc[4096];
    snprintf(tj, sizeof tj, "%s/tokenizer.json", path);
    snprintf(tc, sizeof tc, "%s/tokenizer_config.json", path);
    if (!hearth_path_is_file(tj)) return HEARTH_OK; /* a model without a tokenizer: ids only */
    return hearth_tok_load_json(&s->tok, tj, hearth_path_is_file(tc) ? tc : NULL, err);
}

/* Bytes of RAM the kernel says can be had without swapping, or 0. */
static size_t mem_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    size_t kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %zu kB", &kb) == 1) break;
    if (f) fclose(f);
    return kb * 1024;
}

/* The KV pool: --kv-budget if given; else room for every slot at full
 * context plus one context of prefix-cache headroom, capped to a quarter of
 * the available RAM (CPU). At least one full-length sequence must fit. */
static hearth_status kv_blocks(hearth_session *s, const hearth_session_opts *o, const hearth_model_config *c,
                               int n_slots, int block, int *out, hearth_err *err) {
    size_t per_block = 2 * (size_t)hearth_dtype_get(s->kv_type)->block_bytes * (size_t)c->n_layers * hearth_model_kv_dim(s->model) * block;
    int ctx_blocks = (s->ctx + block - 1) / block;
    long want = (long)ctx_blocks * (n_slots + 1);
    if (o->kv_budget_mib > 0) {
        want = (long)(o->kv_budget_mib * 1048576.0 / per_block);
        if (want < ctx_blocks)
            return hearth_err_set(err, HEARTH_EINVAL,
                                  "--kv-budget %.0f MiB holds %ld positions; the context of %d needs %.1f MiB",
                                  o->kv_budget_mib, want * block, s->ctx, ctx_blocks * (double)per_block / 1048576.0);
    } else if (!s->ops->host_memory) {
        /* a device: its free memory after the weights, less a reserve for
         * the backend's workspaces (cuBLAS, graphs) */
        hearth_cuda_device_info info;
        size_t reserve = (size_t)2 << 30;
        if (hearth_cuda_device_query(s->cuda_device, &info) == 0 && info.mem_free > reserve) {
            long cap = (long)((info.mem_free - reserve) / per_block);
            if (want > cap) want = cap > ctx_blocks ? cap : ctx_blocks;
        }
    } else {
        size_t avail = mem_available();
        long cap = avail ? (long)(avail / 4 / per_block) : want;
        if (want > cap) want = cap > ctx_blocks ? cap : ctx_blocks;
    }
    *out = (int)want;
    return HEARTH_OK;
}

/* The adapters of o->lora, in order (ids 1..). */
static hearth_status load_adapters(hearth_session *s, const hearth_session_opts *o, hearth_err *err) {
    for (int i = 0; i < o->n_lora; i++) {
        const char *arg = o->lora[i], *eq = strchr(arg, '='), *dir = eq ? eq + 1 : arg;
        char name[256];
        if (eq) {
            snprintf(name, sizeof name, "%.*s", (int)(eq - arg), arg);
        } else { /* the directory's last component */
            size_t n = strlen(dir);
            while (n > 1 && dir[n - 1] == '/') n--;
            size_t b = n;
            while (b > 0 && dir[b - 1] != '/') b--;
            snprintf(name, sizeof name, "%.*s", (int)(n - b), dir + b);
        }
        if (!name[0] || !dir[0])
            return hearth_err_set(err, HEARTH_EINVAL, "LoRA adapter '%s': expected NAME=DIR or DIR", arg);
        if (hearth_model_lora_find(s->model, name))
            return hearth_err_set(err, HEARTH_EINVAL, "LoRA adapter name '%s' is given twice", name);
        int id;
        hearth_status st = hearth_model_add_lora(s->model, name, dir, &id, err);
        if (st) return hearth_err_wrap(err, st, "LoRA adapter '%s'", name);
    }
    return HEARTH_OK;
}

const char *hearth_session_device(const char *device) {
    /* The CUDA runtime is only initialised where an NVIDIA driver exists:
     * starting it in a server process without one changed how the process
     * notices a client's closed socket (tests/e2e/test_server_lifecycle.py). */
    return device                                                                      ? device
           : access("/dev/nvidiactl", F_OK) == 0 && hearth_cuda_device_count() > 0 ? "cuda"
                                                                                   : "cpu";
}

hearth_status hearth_session_open(hearth_session *s, const hearth_session_opts *o, hearth_err *err) {
    memset(s, 0, sizeof *s);
    double t0 = hearth_time_now();
    hearth_model_config cfg;
    hearth_status st = hearth_model_peek_config(o->model_path, &cfg, err);
    if (st != HEARTH_OK) return st;
    s->ctx = o->ctx > 0 ? o->ctx : (cfg.max_position_embeddings > 0 && cfg.max_position_embeddings < 4096
                                        ? cfg.max_position_embeddings
                                        : 4096);
    s->max_tokens = o->max_tokens > 0 ? o->max_tokens : 0; /* 0: the backend's default */
    if ((st = open_backend(s, o, &cfg, err)) != HEARTH_OK) goto fail;
    if (!o->kv_type) {
        s->kv_type = HEARTH_DT_F16; /* as llama.cpp's; the CPU attention reads it as fast as f32 (session 31) */
    } else if (!strcmp(o->kv_type, "f32")) {
        s->kv_type = HEARTH_DT_F32;
    } else if (!strcmp(o->kv_type, "f16")) {
        s->kv_type = HEARTH_DT_F16;
    } else if (!strcmp(o->kv_type, "fp8") || !strcmp(o->kv_type, "e4m3")) {
        s->kv_type = HEARTH_DT_E4M3;
    } else {
        st = hearth_err_set(err, HEARTH_EINVAL, "KV cache type '%s': expected f32, f16 or fp8 (e4m3)", o->kv_type);
        goto fail;
    }
    if ((st = check_device_room(s, o->model_path, HEARTH_OK, err))) goto fail;
    /* a step asks for the logits of one row a sequence (and of each drafted token behind it), and the KV holds
     * n_slots of them */
    int n_slots = o->n_slots > 0 ? o->n_slots : s->ops->host_memory ? 4 : 256, block = 16;
    int logit_rows = n_slots * (1 + (o->spec_tokens > 0 ? o->spec_tokens : 0)) +
                     (o->prompt_logprob_rows > 0 ? o->prompt_logprob_rows : 0);
    if ((st = hearth_model_load(&s->model, o->model_path, s->ops, s->ops_ctx, s->max_tokens, logit_rows, err))) {
        st = check_device_room(s, o->model_path, st, err);
        goto fail;
    }
    if ((st = load_adapters(s, o, err))) goto fail; /* before the KV pool takes what memory is left */
    const hearth_model_config *c = hearth_model_config_get(s->model);
    s->n_slots = n_slots;
    int n_blocks = 0;
    if ((st = kv_blocks(s, o, c, n_slots, block, &n_blocks, err))) goto fail;
    if ((st = hearth_kv_new(&s->kv, s->ops, s->ops_ctx, c->n_layers, hearth_model_kv_dim(s->model), c->head_dim,
                            s->kv_type, block, n_blocks, n_slots, s->ctx, err)))
        goto fail;
    s->kv_blocks = n_blocks;
    if (o->cache_dir) {
        double gib = o->cache_disk_gib > 0 ? o->cache_disk_gib : 16.0;
        if ((st = hearth_kv_disk_open(&s->disk, o->cache_dir, (uint64_t)(gib * 1073741824.0), err)) ||
            (st = hearth_kv_attach_disk(s->kv, s->disk, o->cache_write_mib_s, err)))
            goto fail;
    }
    if ((st = open_tokenizer(s, o->model_path, err))) goto fail;
    if (o->need_tokenizer && !s->tok) {
        st = hearth_err_set(err, HEARTH_ENOENT,
                            "%s has no tokenizer: text needs one (hearth run takes --prompt-ids and prints --ids)",
                            o->model_path);
        goto fail;
    }
    s->load_s = hearth_time_now() - t0;
    return HEARTH_OK;
fail:
    hearth_session_close(s);
    return st;
}

void hearth_session_close(hearth_session *s) {
    if (s->tok) hearth_tok_free(s->tok);
    if (s->kv && s->disk && hearth_kv_disk_of(s->kv)) { /* what the prefix cache holds, durable for the next run */
        hearth_err err = {0};
        int n = 0;
        double t0 = hearth_time_now();
        if (hearth_kv_flush(s->kv, &n, &err) == HEARTH_OK) {
            hearth_kv_disk_stats ds;
            hearth_kv_disk_stats_get(s->disk, &ds);
            hearth_log_info("prefix cache: %d blocks written at close in %.2f s, %ld on disk (%.1f MiB)", n,
                            hearth_time_now() - t0, ds.files, ds.bytes / 1048576.0);
        } else {
            hearth_log_warn("prefix cache: flush at close: %s", err.msg);
        }
    }
    if (s->kv) hearth_kv_free(s->kv);
    if (s->disk) hearth_kv_disk_close(s->disk);
    if (s->model) hearth_model_free(s->model);
    if (s->ops == &hearth_cpu_ops) hearth_cpu_ctx_free(s->ops_ctx);
#ifdef HEARTH_CUDA
    if (s->ops == &hearth_cuda_ops) hearth_cuda_ctx_free(s->ops_ctx);
#endif
    memset(s, 0, sizeof *s);
}
