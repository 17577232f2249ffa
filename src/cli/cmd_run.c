/* cmd_run.c - `hearth run MODEL "prompt"`: one-shot generation to stdout,
 * speeds to stderr; `--prompt-ids 1,2,3 --ids` for models without a tokenizer. */
#include "cli/cli.h"
#include "completion/dry_breakers.h"
#include "completion/grammar.h"
#include "completion/json_mode.h"
#include "core/file.h"
#include "lib/session.h"
#include "engine/engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: hearth run MODEL [PROMPT] [options]\n\n"
            "Generate a continuation of PROMPT (raw text, no chat template) and stream it to stdout;\n"
            "prompt and decode speeds go to stderr. MODEL is a GGUF file or a Hugging Face model directory.\n\n"
            "options:\n"
            "  -n, --max-tokens N      tokens to generate (default 128)\n"
            "  --temp T                temperature, 0 = greedy (default 0.8)\n"
            "  --top-p P  --top-k K  --min-p P\n"
            "  --repeat-penalty R  --presence-penalty P  --frequency-penalty F\n"
            "  --repeat-last-n N  --typical P  --top-nsigma N  --xtc-probability P  --xtc-threshold T\n"
            "  --dry-multiplier M  --dry-base B  --dry-allowed-length N  --dry-penalty-last-n N\n"
            "  --dynatemp-range R  --dynatemp-exp E  --mirostat 1|2  --mirostat-ent TAU  --mirostat-lr ETA\n"
            "                          llama.cpp's samplers, as llama-cli's flags (windows: -1 = the context)\n"
            "  --seed S                seed for sampling (same seed, same output)\n"
            "  --prompt-ids 1,2,3      token ids instead of PROMPT\n"
            "  --ids                   print generated ids (space-separated) instead of text\n"
            "  --ignore-eos            do not stop at end-of-generation tokens\n"
            "  --json                  the output is one JSON object (JSON mode)\n"
            "  --json-schema FILE      the output is one JSON object that this JSON Schema accepts\n"
            "                          (the subset of src/completion/json_mode.h)\n"
            "  --grammar GBNF          the output matches this grammar (llama.cpp's GBNF; its rule 'root')\n"
            "  --grammar-file FILE     the same, read from FILE\n"
            "  --threads T             CPU threads (default: one per core)\n"
            "  --ctx N                 context length (default: model's, at most 4096)\n"
            "  --device D              cpu, cuda or cuda:N\n"
            "  --kv-type T             KV cache type, f32, f16 or fp8 (e4m3) (default: f16)\n"
            "  --cache-dir DIR         keep the prompt's KV blocks in DIR (written at exit, content-addressed):\n"
            "                          a later run whose prompt starts the same way reads them instead of\n"
            "                          computing them (as llama-cli's --prompt-cache; serve takes it too)\n"
            "  --lora DIR              generate with this LoRA adapter (PEFT's format: adapter_config.json +\n"
            "                          adapter_model.safetensors)\n" CLI_SPEC_USAGE);
}

typedef struct {
    const hearth_tokenizer *tok;
    hearth_detok detok;
    int print_ids, n_printed;
} run_out;

static int on_token(void *user, int32_t id, const hearth_logprobs *lp) {
    run_out *o = user;
    if (o->print_ids) {
        printf(o->n_printed++ ? " %d" : "%d", id);
    } else {
        char buf[512];
        size_t n = hearth_detok_push(&o->detok, id, buf, sizeof buf);
        fwrite(buf, 1, n, stdout);
    }
    fflush(stdout);
    return 0;
}

static int parse_ids(const char *s, int32_t **out, int *n) {
    int cap = 16, k = 0;
    int32_t *ids = malloc(sizeof *ids * (size_t)cap);
    const char *p = s;
    while (ids && *p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v > 0x7fffffff || (*end && *end != ',')) {
            free(ids);
            return 0;
        }
        if (k == cap) {
            int32_t *n2 = realloc(ids, sizeof *ids * (size_t)(cap *= 2));
            if (!n2) break;
            ids = n2;
        }
        ids[k++] = (int32_t)v;
        p = *end ? end + 1 : end;
    }
    if (!ids || k == 0) {
        free(ids);
        return 0;
    }
    *out = ids;
    *n = k;
    return 1;
}

int cmd_run(int argc, char **argv) {
    hearth_session_opts so = {.n_slots = 1};
    hearth_sampling sp;
    hearth_sampling_default(&sp);
    sp.temperature = 0.8f;
    const char *prompt = NULL, *prompt_ids = NULL;
    long max_new = 128, lv;
    double dv;
    int print_ids = 0, ignore_eos = 0, json = 0;
    const char *schema_file = NULL, *grammar = NULL, *grammar_file = NULL;
    int repeat_last_n = -1, dry_last_n = -1; /* -1: the whole context */
    cli_stack_opts spec = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED_VALUE() \
    if (!v) return cli_usage_error("run", "%s needs a value", a); \
    i++
        int sf = cli_spec_flag("run", argc, argv, &i, &spec);
        if (sf < 0) return 2;
        if (sf > 0) continue;
        if (cli_is_help(a)) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "-n") || !strcmp(a, "--max-tokens")) {
            NEED_VALUE();
            if (!cli_parse_int("run", a, v, &max_new)) return 2;
            if (max_new < 0) return cli_usage_error("run", "%s must be >= 0", a);
        } else if (!strcmp(a, "--temp")) {
            NEED_VALUE();
            if (!cli_parse_float("run", a, v, &dv)) return 2;
            sp.temperature = (float)dv;
        } else if (!strcmp(a, "--top-p")) {
            NEED_VALUE();
            if (!cli_parse_float("run", a, v, &dv)) return 2;
            sp.top_p = (float)dv;
        } else if (!strcmp(a, "--min-p")) {
            NEED_VALUE();
            if (!cli_parse_float("run", a, v, &dv)) return 2;
            sp.min_p = (float)dv;
        } else if (!strcmp(a, "--top-k")) {
            NEED_VALUE();
            if (!cli_parse_int("run", a, v, &lv)) return 2;
            sp.top_k = (int)lv;
        } else if (!strcmp(a, "--repeat-penalty")) {
            NEED_VALUE();
            if (!cli_parse_float("run", a, v, &dv)) return 2;
            sp.repetition_penalty = (float)dv;
        } else if (!strcmp(a, "--typical") || !strcmp(a, "--top-nsigma") || !strcmp(a, "--xtc-probability") ||
                   !strcmp(a, "--xtc-threshold") || !strcmp(a, "--dry-multiplier") || !strcmp(a, "--dry-base")) {
            NEED_VALUE();
            if (!cli_parse_float("run", a, v, &dv)) return 2;
            float f = (float)dv;
            if (!strcmp(a, "--typical")) sp.typical_p = f;
            else if (!strcmp(a, "--top-nsigma")) sp.top_n_sigma = f > 0 ? f : 0;
            else if (!strcmp(a, "--xtc-probability")) sp.xtc_probability = f;
            else if (!strcmp(a, "--xtc-threshold")) sp.xtc_threshold = f;
            else if (!strcmp(a, "--dry-multiplier")) sp.dry.multiplier = f;
            else sp.dry.base = f;
        } else if (!strcmp(a, "--dynatemp-range") || !strcmp(a, "--dynatemp-exp") || !strcmp(a, "--mirostat-ent") ||
                   !strcmp(a, "--mirostat-lr")) {
            NEED_VALUE();
            if (!cli_parse_float("run", a, v, &dv)) return 2;
            if (!strcmp(a, "--dynatemp-range")) sp.dynatemp_range = dv > 0 ? (float)dv : 0;
            else if (!strcmp(a, "--dynatemp-exp")) sp.dynatemp_exponent = (float)dv;
            else if (!strcmp(a, "--mirostat-ent")) sp.mirostat_tau = (float)dv;
            else sp.mirostat_eta = (float)dv;
        } else if (!strcmp(a, "--mirostat")) {
            NEED_VALUE();
            if (!cli_parse_int("run", a, v, &lv)) return 2;
            sp.mirostat = (int)lv;
        } else if (!strcmp(a, "--repeat-last-n") || !strcmp(a, "--dry-allowed-length") ||
                   !strcmp(a, "--dry-penalty-last-n")) {
            NEED_VALUE();
            if (!cli_parse_int("run", a, v, &lv)) return 2;
            if (lv < -1 || lv > (1 << 30)) return cli_usage_error("run", "%s %s is out of range", a, v);
            if (!strcmp(a, "--repeat-last-n")) repeat_last_n = (int)lv;
            else if (!strcmp(a, "--dry-allowed-length")) sp.dry.allowed_length = (int)lv;
            else dry_last_n = (int)lv;
        } else if (!strcmp(a, "--presence-penalty")) {
            NEED_VALUE();
            if (!cli_parse_float("run", a, v, &dv)) return 2;
            sp.presence_penalty = (float)dv;
        } else if (!strcmp(a, "--frequency-penalty")) {
            NEED_VALUE();
            if (!cli_parse_float("run", a, v, &dv)) return 2;
            sp.frequency_penalty = (float)dv;
        } else if (!strcmp(a, "--seed")) {
            NEED_VALUE();
            if (!cli_parse_int("run", a, v, &lv)) return 2;
            sp.seed = (uint64_t)lv;
            sp.has_seed = 1;
        } else if (!strcmp(a, "--prompt-ids")) {
            NEED_VALUE();
            prompt_ids = v;
        } else if (!strcmp(a, "--ids")) {
            print_ids = 1;
        } else if (!strcmp(a, "--ignore-eos")) {
            ignore_eos = 1;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--json-schema")) {
            NEED_VALUE();
            schema_file = v;
        } else if (!strcmp(a, "--grammar")) {
            NEED_VALUE();
            grammar = v;
        } else if (!strcmp(a, "--grammar-file")) {
            NEED_VALUE();
            grammar_file = v;
        } else if (!strcmp(a, "--threads")) {
            NEED_VALUE();
            if (!cli_parse_int("run", a, v, &lv)) return 2;
            so.threads = (int)lv;
        } else if (!strcmp(a, "--ctx")) {
            NEED_VALUE();
            if (!cli_parse_int("run", a, v, &lv)) return 2;
            so.ctx = (int)lv;
        } else if (!strcmp(a, "--device")) {
            NEED_VALUE();
            so.device = v;
        } else if (!strcmp(a, "--kv-type")) {
            NEED_VALUE();
            so.kv_type = v;
        } else if (!strcmp(a, "--cache-dir")) {
            NEED_VALUE();
            so.cache_dir = v;
        } else if (!strcmp(a, "--lora")) {
            NEED_VALUE();
            so.lora = (const char *const *)&argv[i], so.n_lora = 1;
        } else if (a[0] == '-' && a[1]) {
            return cli_usage_error("run", "unknown option '%s'", a);
        } else if (!so.model_path) {
            so.model_path = a;
        } else if (!prompt) {
            prompt = a;
        } else {
            return cli_usage_error("run", "unexpected argument '%s'", a);
        }
#undef NEED_VALUE
    }
    if (!so.model_path) return cli_usage_error("run", "missing MODEL");
    if (!prompt && !prompt_ids) return cli_usage_error("run", "give a PROMPT or --prompt-ids");
    if (prompt && prompt_ids) return cli_usage_error("run", "give a PROMPT or --prompt-ids, not both");
    int32_t *ids = NULL;
    int n_ids = 0;
    if (prompt_ids && !parse_ids(prompt_ids, &ids, &n_ids))
        return cli_usage_error("run", "--prompt-ids expects comma-separated token ids, got '%s'", prompt_ids);
    if ((json || schema_file || grammar || grammar_file) && ignore_eos)
        return cli_usage_error("run", "--json, --json-schema and --grammar end the answer where it is complete: not "
                               "with --ignore-eos");
    if ((json || schema_file) + (grammar || grammar_file) > 1 || (grammar && grammar_file))
        return cli_usage_error("run", "give one of --json / --json-schema, --grammar and --grammar-file");
    so.need_tokenizer = !print_ids || prompt || json || schema_file || grammar || grammar_file || sp.dry.multiplier;
    so.spec_tokens = spec.spec_tokens;
    json_t *schema_doc = NULL;
    if (schema_file) {
        json_error_t je;
        if (!(schema_doc = json_load_file(schema_file, 0, &je)))
            return cli_usage_error("run", "--json-schema %s: %s (line %d)", schema_file, je.text, je.line);
    }
    hearth_grammar *gram = NULL; /* compiled before the model loads: a bad grammar fails at once */
    if (grammar || grammar_file) {
        char *text = NULL;
        size_t len = grammar ? strlen(grammar) : 0;
        hearth_err ge = {0};
        hearth_status gst = grammar_file ? hearth_file_read(grammar_file, &text, &len, &ge) : HEARTH_OK;
        if (gst == HEARTH_OK) gst = hearth_grammar_compile(&gram, grammar ? grammar : text, len, &ge);
        free(text);
        if (gst != HEARTH_OK) {
            json_decref(schema_doc);
            return grammar ? cli_usage_error("run", "--grammar: %s", ge.msg)
                           : cli_usage_error("run", "--grammar-file %s: %s", grammar_file, ge.msg);
        }
    }

    hearth_err err = {0};
    hearth_session s;
    int rc = 1;
    hearth_engine *eng = NULL;
    hearth_vocab_bytes vb = {0};
    hearth_dry_breakers dry = {0};
    hearth_gen_request q = {0};
    if (hearth_session_open(&s, &so, &err) != HEARTH_OK) {
        fprintf(stderr, "hearth run: %s\n", err.msg);
        free(ids);
        json_decref(schema_doc);
        hearth_grammar_free(gram);
        return 1;
    }
    const hearth_model_config *cfg = hearth_model_config_get(s.model);
    if (prompt) {
        size_t n;
        if (hearth_tok_encode(s.tok, prompt, strlen(prompt), 1, 0, &ids, &n, &err) != HEARTH_OK) goto done;
        n_ids = (int)n;
    }
    for (int i = 0; i < n_ids; i++)
        if (ids[i] >= cfg->vocab_size) {
            hearth_err_set(&err, HEARTH_ERANGE, "prompt token id %d outside the vocabulary [0, %d)", ids[i],
                           cfg->vocab_size);
            goto done;
        }
    /* One request through the engine: B=1 is the engine's ordinary path. */
    if (repeat_last_n == 0) sp.repetition_penalty = 1.0f;
    else if (repeat_last_n > 0) sp.repeat_last_n = repeat_last_n;
    if (sp.dry.multiplier != 0.0f && dry_last_n != 0) { /* llama.cpp's default breakers */
        sp.dry_last_n = dry_last_n < 0 || dry_last_n > s.ctx ? s.ctx : dry_last_n;
        if (hearth_vocab_bytes_once(&vb, NULL, s.tok, &err) != HEARTH_OK ||
            hearth_dry_breakers_default(&dry, &vb, s.tok, &err) != HEARTH_OK)
            goto done;
        sp.dry_breakers = &dry;
    } else {
        sp.dry.multiplier = 0.0f;
    }
    q.sampling = sp;
    q.max_new = (int)max_new;
    q.adapter = so.n_lora; /* the adapter's id: 1, if one was given */
    if (!ignore_eos) {
        for (int i = 0; i < cfg->n_eos && q.n_stop < 8; i++) q.stop_ids[q.n_stop++] = cfg->eos_token_ids[i];
        if (s.tok)
            for (int id = 0; id < hearth_tok_n_vocab(s.tok) && q.n_stop < HEARTH_MAX_STOP_IDS; id++)
                if (hearth_tok_is_eog(s.tok, id)) q.stop_ids[q.n_stop++] = id;
    }
    if (json || schema_file) { /* the sampler's constraint (completion/json_mode.h) */
        hearth_schema *schema = NULL;
        if (schema_file && hearth_schema_compile(&schema, schema_doc, &err) != HEARTH_OK) goto done;
        if (hearth_json_constraint_lazy(&q.sampling.constraint, &vb, NULL, s.tok, schema, q.stop_ids, q.n_stop,
                                        &err) != HEARTH_OK)
            goto done; /* the schema was freed with the failure */
    }
    if (gram) { /* the constraint takes the grammar, on failure too */
        hearth_grammar *g = gram;
        gram = NULL;
        if (hearth_vocab_bytes_once(&vb, NULL, s.tok, &err) != HEARTH_OK) {
            hearth_grammar_free(g);
            goto done;
        }
        if (hearth_grammar_constraint(&q.sampling.constraint, &vb, g, q.stop_ids, q.n_stop, &err) != HEARTH_OK)
            goto done;
    }
    run_out out = {.tok = s.tok, .print_ids = print_ids};
    if (s.tok) hearth_detok_init(&out.detok, s.tok, 1);
    hearth_seq_summary sum = {0};
    if (max_new > 0) {
        hearth_engine_opts eo = {.n_slots = 1,
                                 .spec_tokens = spec.spec_tokens,
                                 .spec_ngram_min = spec.spec_ngram_min,
                                 .spec_ngram_max = spec.spec_ngram_max};
        hearth_seq *seq;
        if (hearth_engine_new(&eng, s.model, s.kv, &eo, &err) != HEARTH_OK) goto done;
        q.prompt = ids;
        q.n_prompt = n_ids;
        if (hearth_engine_submit(eng, &q, &seq, &err) != HEARTH_OK) goto done;
        ids = NULL; /* the engine owns the prompt now */
        hearth_token_event ev;
        while (hearth_seq_next(seq, &ev, -1) == 1) on_token(&out, ev.id, NULL);
        hearth_seq_summary_get(seq, &sum);
        hearth_seq_release(seq);
        if (sum.finish == HEARTH_FINISH_ERROR) {
            hearth_err_set(&err, HEARTH_EIO, "%s", sum.error);
            goto done;
        }
    }
    if (!print_ids && s.tok) {
        char buf[64];
        fwrite(buf, 1, hearth_detok_finish(&out.detok, buf, sizeof buf), stdout);
    }
    printf("\n");
    fflush(stdout);
    if (max_new > 0) {
        char cached[48] = "";
        if (sum.n_cached > 0) snprintf(cached, sizeof cached, " (%d from the prefix cache)", sum.n_cached);
        fprintf(stderr, "hearth: prompt %d tokens%s, %.1f tok/s; decode %d tokens, %.1f tok/s; load %.2f s (%s)\n",
                sum.n_prompt, cached, sum.n_prompt / sum.prefill_s, sum.n_gen,
                sum.n_gen > 1 ? (sum.n_gen - 1) / sum.decode_s : 0.0, s.load_s, s.ops->name);
        hearth_engine_stats es;
        hearth_engine_stats_get(eng, &es);
        if (spec.spec_tokens > 0)
            fprintf(stderr, "hearth: drafted %ld tokens, %ld accepted (%.0f%%); %ld forwards for %d tokens\n",
                    es.spec_drafted, es.spec_accepted,
                    es.spec_drafted ? 100.0 * (double)es.spec_accepted / (double)es.spec_drafted : 0.0, es.steps,
                    sum.n_gen);
    }
    rc = 0;
done:
    if (rc) fprintf(stderr, "hearth run: %s\n", err.msg);
    hearth_engine_free(eng);
    if (q.sampling.constraint.free) q.sampling.constraint.free(q.sampling.constraint.self); /* not taken */
    hearth_vocab_bytes_free(&vb);
    hearth_dry_breakers_free(&dry);
    hearth_grammar_free(gram);
    json_decref(schema_doc);
    free(ids);
    hearth_session_close(&s);
    return rc;
}
