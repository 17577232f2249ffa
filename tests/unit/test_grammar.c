/* test_grammar.c - GBNF grammars: what each grammar accepts, prefix by
 * prefix and byte by byte; what it refuses to compile, by name; a JSON
 * grammar against a corpus and, through the sampler with a vocabulary whose
 * likeliest tokens break JSON, against jansson (the oracle). */
#include "testhelp.h"

#include "completion/grammar.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { REFUSED, OPEN, DONE, DONE_OPEN }; /* DONE: complete, nothing may follow; DONE_OPEN: complete or longer */

static int classify(const hearth_grammar *g, const char *text, int byte_by_byte) {
    hearth_grammar_state s, scratch = {0};
    if (hearth_grammar_state_init(g, &s) != HEARTH_OK) return -1;
    size_t n = strlen(text);
    int ok = 1;
    if (byte_by_byte)
        for (size_t i = 0; i < n && ok; i++) ok = hearth_grammar_feed(g, &s, &scratch, (const uint8_t *)text + i, 1);
    else
        ok = hearth_grammar_feed(g, &s, &scratch, (const uint8_t *)text, n);
    int r = !ok ? REFUSED
            : hearth_grammar_done(&s) ? (hearth_grammar_open(&s) ? DONE_OPEN : DONE)
                                      : (hearth_grammar_open(&s) || s.need ? OPEN : REFUSED);
    hearth_grammar_state_deinit(&s);
    hearth_grammar_state_deinit(&scratch);
    return r;
}

static hearth_grammar *compile(const char *text) {
    hearth_grammar *g = NULL;
    hearth_err err = {0};
    if (hearth_grammar_compile(&g, text, strlen(text), &err) != HEARTH_OK)
        test_fail(__FILE__, __LINE__, "does not compile: %s\n%s", err.msg, text);
    return g;
}

static const struct {
    const char *grammar, *text;
    int want;
} CASES[] = {
    {"root ::= \"yes\" | \"no\"", "yes", DONE},
    {"root ::= \"yes\" | \"no\"", "ye", OPEN},
    {"root ::= \"yes\" | \"no\"", "yex", REFUSED},
    {"root ::= \"yes\" | \"no\"", "", OPEN},
    {"root ::= \"yes\" | \"no\"", "no", DONE},
    {"root ::= [0-9]{2,4}", "1", OPEN},
    {"root ::= [0-9]{2,4}", "12", DONE_OPEN},
    {"root ::= [0-9]{2,4}", "1234", DONE},
    {"root ::= [0-9]{2,4}", "12345", REFUSED},
    {"root ::= [0-9]{3}", "123", DONE},
    {"root ::= [0-9]{3}", "12a", REFUSED},
    {"root ::= \"a\"{2,} \"b\"", "ab", REFUSED},
    {"root ::= \"a\"{2,} \"b\"", "aaaaab", DONE},
    {"root ::= \"x\"{,2}", "", DONE_OPEN},
    {"root ::= \"x\"{,2}", "xx", DONE},
    {"root ::= (\"ab\")+ \"!\"?", "ababab", DONE_OPEN},
    {"root ::= (\"ab\")+ \"!\"?", "aba!", REFUSED},
    {"root ::= (\"ab\")+ \"!\"?", "ab!", DONE},
    {"root ::= \"ab\"* \"c\"", "ababc", DONE},
    {"root ::= \"ab\"* \"c\"", "abac", REFUSED},
    {"root ::= \"\\\"\" [^\"\\\\]* \"\\\"\"", "\"caf\xc3\xa9 ok\"", DONE},
    {"root ::= \"\\\"\" [^\"\\\\]* \"\\\"\"", "\"a\\b\"", REFUSED},
    {"root ::= .{3}", "a\xce\xb2\n", DONE},
    {"root ::= .{3}", "abcd", REFUSED},
    {"root ::= [\\u03b1-\\u03c9]+", "\xce\xb1\xce\xb2", DONE_OPEN},
    {"root ::= [\\u03b1-\\u03c9]+", "\xce", OPEN},      /* the start of a Greek letter */
    {"root ::= [\\u03b1-\\u03c9]+", "\xe6\x97", REFUSED}, /* the start of a CJK one */
    {"root ::= [\\u03b1-\\u03c9]+", "a", REFUSED},
    {"root ::= [^a-z]", "\xf0\x9f\x98\x80", DONE},
    /* UTF-8's own rules: a lead byte whose sequences cannot be ASCII, overlong forms, past U+10FFFF */
    {"root ::= [a-z]+", "\xe0", REFUSED},
    {"root ::= [a-z]+", "\xf0", REFUSED},
    {"root ::= [a-z]+", "\xc1\xa1", REFUSED},
    {"root ::= .", "\xe0\x80\x80", REFUSED},
    {"root ::= .", "\xe0\xa0\x80", DONE},
    {"root ::= .", "\xf4\x90\x80\x80", REFUSED},
    {"root ::= .", "\x80", REFUSED},
    {"root ::= [^a-z]", "q", REFUSED},
    {"root ::= \"\\x41\\u00e9\\U0001F600\\n\\t\"", "A\xc3\xa9\xf0\x9f\x98\x80\n\t", DONE},
    /* rules, comments, continuation lines, rules used before their definition */
    {"# a comment\nroot ::= greeting \" \" name # another\n  | \"bye\"\ngreeting ::= \"hi\" | \"hello\"\n"
     "name ::= [A-Z] [a-z]*\n",
     "hello Ann", DONE_OPEN},
    {"root ::= greeting \" \" name\n  | \"bye\"\ngreeting ::= \"hi\" | \"hello\"\nname ::= [A-Z] [a-z]*\n", "bye",
     DONE},
    {"root ::= greeting \" \" name\ngreeting ::= \"hi\" | \"hello\"\nname ::= [A-Z] [a-z]*\n", "hi ann", REFUSED},
    /* a group across lines, an empty alternative */
    {"root ::= (\n  \"a\" |\n  \"b\" |\n) \"c\"\n", "c", DONE},
    {"root ::= (\n  \"a\" |\n  \"b\" |\n) \"c\"\n", "bc", DONE},
    /* right recursion (nested brackets) */
    {"root ::= item\nitem ::= \"[\" item? \"]\"\n", "[[[]]]", DONE},
    {"root ::= item\nitem ::= \"[\" item? \"]\"\n", "[[]]]", REFUSED},
    {"root ::= item\nitem ::= \"[\" item? \"]\"\n", "[[[", OPEN},
};

TEST(grammar_accepts_and_refuses_prefix_by_prefix) {
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) {
        hearth_grammar *g = compile(CASES[i].grammar);
        if (!g) continue;
        for (int bb = 0; bb < 2; bb++) {
            int got = classify(g, CASES[i].text, bb);
            if (got != CASES[i].want)
                test_fail(__FILE__, __LINE__, "case %zu (%s): '%s' classified %d, expected %d\n%s", i,
                          bb ? "byte by byte" : "at once", CASES[i].text, got, CASES[i].want, CASES[i].grammar);
        }
        hearth_grammar_free(g);
    }
}

TEST(grammar_compile_errors_name_the_fault) {
    static const struct {
        const char *grammar, *msg;
    } BAD[] = {
        {"root ::= value", "line 1: rule 'value' is used but not defined"},
        {"item ::= \"x\"", "no rule named 'root'"},
        {"root ::= root \"x\" | \"y\"", "rule 'root' is left-recursive"},
        {"root ::= a\na ::= b a\nb ::= \"x\"?", "left-recursive"},
        {"root ::= \"a\"\nroot ::= \"b\"", "line 2: rule 'root' is defined twice"},
        {"root ::= \"abc", "a literal without its closing"},
        {"root ::= [a-", "a character class without its ']'"},
        {"root ::= [z-a]", "whose end U+0061 is before its start U+007A"},
        {"root ::= \"\\q\"", "unknown escape '\\q'"},
        {"root ::= \"a\"{3,1}", "a repetition {3,1} whose bound is below its count"},
        {"root ::= \"a\"{99999}", "a repetition count above 4096"},
        {"root ::= (\"a\"", "expected ')'"},
        {"root = \"a\"", "expected '::=' after the rule name 'root'"},
        {"root ::= \"a\" )", "unexpected ')' in rule 'root'"},
        {"\n\nroot ::= \"\"*", "line 3: a repetition with nothing before it"},
        {"root ::= *", "unexpected '*' in rule 'root'"},
        {"root ::= \"a\"\n  \"c\"", "line 2: expected a rule name, got '\"' (a rule goes on"},
        {"root ::= \"\\xZZ\"", "expected 2 hex digits"},
    };
    for (size_t i = 0; i < sizeof BAD / sizeof *BAD; i++) {
        hearth_grammar *g = NULL;
        hearth_err err = {0};
        hearth_status st = hearth_grammar_compile(&g, BAD[i].grammar, strlen(BAD[i].grammar), &err);
        if (st != HEARTH_EINVAL || g || !strstr(err.msg, BAD[i].msg))
            test_fail(__FILE__, __LINE__, "'%s': status %d, message '%s', expected one with '%s'", BAD[i].grammar,
                      (int)st, err.msg, BAD[i].msg);
        hearth_grammar_free(g);
    }
}

TEST(grammar_choices_are_exact) {
    const char *choices[] = {"positive", "negative", "say \"neutral\"\\", "caf\xc3\xa9\n", ""};
    hearth_grammar *g = NULL;
    hearth_err err = {0};
    CHECK_EQ(hearth_grammar_choices(&g, choices, 5, &err), HEARTH_OK);
    CHECK_EQ(classify(g, "positive", 0), DONE);
    CHECK_EQ(classify(g, "negative", 0), DONE);
    CHECK_EQ(classify(g, "say \"neutral\"\\", 0), DONE);
    CHECK_EQ(classify(g, "caf\xc3\xa9\n", 0), DONE);
    CHECK_EQ(classify(g, "", 0), DONE_OPEN); /* the empty choice, or the start of the others */
    CHECK_EQ(classify(g, "pos", 0), OPEN);
    CHECK_EQ(classify(g, "positives", 0), REFUSED);
    hearth_grammar_free(g);
}

/* JSON, written as a grammar (jansson is the oracle for what it accepts) */
static const char *JSON_GBNF =
    "root   ::= ws object ws\n"
    "object ::= \"{\" ws ( member ( ws \",\" ws member )* )? ws \"}\"\n"
    "member ::= string ws \":\" ws value\n"
    "array  ::= \"[\" ws ( value ( ws \",\" ws value )* )? ws \"]\"\n"
    "value  ::= object | array | string | number | \"true\" | \"false\" | \"null\"\n"
    "string ::= \"\\\"\" ( [^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4} ) )* \"\\\"\"\n"
    "number ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,15} ) ( \".\" [0-9]+ )? ( [eE] [-+]? [0-9]{1,2} )?\n"
    "ws     ::= [ \\t\\n]{0,8}\n";

static const char *JSON_VALID[] = {
    "{}",
    "{ }",
    "{\"a\":1}",
    "{\"a\": -0.5e+10, \"b\": [true, false, null, [], {}], \"c\": \"x\\\"y\\\\z\\u00e9\\n\"}",
    "{\"k\": [1, 2.25, -3, 4E2, 0, {\"deep\": [[[\"s\"]]]}]}",
    "\n {\"caf\xc3\xa9\": \"\xe6\x97\xa5\xe6\x9c\xac\"}",
};

static const char *JSON_INVALID[] = {
    "[]", "{\"a\" 1}", "{\"a\":01}", "{\"a\":1,}", "{a:1}", "{\"a\":tru}", "{\"a\":\"\x01\"}", "{\"a\":\"\\x\"}",
    "{\"a\":1.}", "{\"a\":[1 2]}", "{\"a\":1]", "{} {}",
};

TEST(grammar_json_accepts_what_jansson_reads) {
    hearth_grammar *g = compile(JSON_GBNF);
    if (!g) return;
    for (size_t i = 0; i < sizeof JSON_VALID / sizeof *JSON_VALID; i++) {
        int got = classify(g, JSON_VALID[i], 0);
        if (got != DONE && got != DONE_OPEN) test_fail(__FILE__, __LINE__, "'%s' classified %d", JSON_VALID[i], got);
        json_t *o = json_loads(JSON_VALID[i], 0, NULL);
        CHECK(json_is_object(o));
        json_decref(o);
    }
    for (size_t i = 0; i < sizeof JSON_INVALID / sizeof *JSON_INVALID; i++) {
        int got = classify(g, JSON_INVALID[i], 1);
        if (got == DONE || got == DONE_OPEN)
            test_fail(__FILE__, __LINE__, "'%s' accepted as complete", JSON_INVALID[i]);
    }
    hearth_grammar_free(g);
}

#include "toy_vocab.h"

TEST(grammar_constraint_makes_the_sampler_write_json) {
    hearth_vocab_bytes v;
    toy_vocab(&v);
    int32_t end = END;
    int ended = 0;
    hearth_grammar *check = compile(JSON_GBNF);
    for (uint64_t seed = 1; seed <= 100 && check; seed++) {
        hearth_sampling p;
        hearth_sampling_default(&p);
        p.temperature = 1.5f;
        p.seed = seed;
        p.has_seed = 1;
        p.top_logprobs = seed % 2 ? 0 : 2; /* the whole mask, or the reachable tokens */
        hearth_grammar *g = compile(JSON_GBNF);
        hearth_err err = {0};
        CHECK_EQ(hearth_grammar_constraint(&p.constraint, &v, g, &end, 1, &err), HEARTH_OK);
        hearth_sampler smp;
        CHECK_EQ(hearth_sampler_init(&smp, &p, v.n, &err), HEARTH_OK);
        char text[4096];
        size_t n = 0;
        int stopped = 0;
        for (int step = 0; step < 300 && !stopped; step++) {
            float logits[N_TOK + 1];
            for (int i = 0; i <= N_TOK; i++)
                logits[i] = (float)((seed * 7 + (uint64_t)i * 13 + (uint64_t)step * 5) % 11) + (i >= 96 ? 4.0f : 0.0f);
            hearth_logprobs lp;
            int32_t id = hearth_sampler_sample(&smp, logits, p.top_logprobs ? &lp : NULL);
            hearth_sampler_accept(&smp, id);
            if (id == END) {
                stopped = 1;
                break;
            }
            size_t k = strlen(TOKENS[id]);
            if (n + k >= sizeof text) break;
            memcpy(text + n, TOKENS[id], k);
            n += k;
        }
        text[n] = 0;
        if (classify(check, text, 0) == REFUSED)
            test_fail(__FILE__, __LINE__, "seed %llu: not the start of the grammar's JSON: %s",
                      (unsigned long long)seed, text);
        if (stopped) {
            ended++;
            json_error_t je;
            json_t *o = json_loads(text, JSON_DECODE_INT_AS_REAL, &je);
            if (!json_is_object(o))
                test_fail(__FILE__, __LINE__, "seed %llu: ended, but jansson does not read an object (%s): %s",
                          (unsigned long long)seed, je.text, text);
            json_decref(o);
        }
        hearth_sampler_deinit(&smp); /* frees the constraint and its grammar */
    }
    CHECK(ended > 25);
    hearth_grammar_free(check);
    hearth_vocab_bytes_free(&v);
}

TEST(grammar_constraint_ends_only_when_complete) {
    /* tokens "a", "b", "ab", the end: root ::= "a" "b"? */
    hearth_vocab_bytes v = {.n = 4};
    v.off = (uint32_t[]){0, 1, 2, 4, 4};
    v.bytes = (uint8_t *)"abab";
    v.special = (uint8_t[]){0, 0, 0, 1};
    int32_t end = 3;
    hearth_grammar *g = compile("root ::= \"a\" \"b\"?");
    hearth_constraint c;
    hearth_err err = {0};
    CHECK_EQ(hearth_grammar_constraint(&c, &v, g, &end, 1, &err), HEARTH_OK);
    float l1[4] = {0, 0, 0, 0};
    c.mask(c.self, l1, 4);
    CHECK(l1[0] == 0 && isinf(l1[1]) && l1[2] == 0 && isinf(l1[3])); /* "a" or "ab"; not yet the end */
    CHECK(c.allows(c.self, 2) && !c.allows(c.self, 1) && !c.allows(c.self, 3));
    c.accept(c.self, 0);
    float l2[4] = {0, 0, 0, 0};
    c.mask(c.self, l2, 4);
    CHECK(isinf(l2[0]) && l2[1] == 0 && isinf(l2[2]) && l2[3] == 0); /* "b" or the end */
    c.accept(c.self, 1);
    float l3[4] = {0, 0, 0, 0};
    c.mask(c.self, l3, 4);
    CHECK(isinf(l3[0]) && isinf(l3[1]) && isinf(l3[2]) && l3[3] == 0); /* only the end */
    c.free(c.self);
}

/* guided_regex: the rewritten grammar against PCRE2 (the oracle): a text is
 * complete exactly where PCRE2 matches the whole of it, and a prefix of a
 * match exactly where PCRE2 reports a hard partial match. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

static int pcre_class(pcre2_code *re, const char *text) {
    /* whole: the backtracking matcher, anchored at both ends; more: the DFA
     * matcher, which follows every path at once (a hard partial match when
     * any path runs out of text while it could still match) */
    pcre2_match_data *md = pcre2_match_data_create(64, NULL);
    int ws[4096];
    size_t n = strlen(text);
    int full = pcre2_match(re, (PCRE2_SPTR)text, n, 0, PCRE2_ANCHORED | PCRE2_ENDANCHORED, md, NULL) >= 0;
    int more = pcre2_dfa_match(re, (PCRE2_SPTR)text, n, 0, PCRE2_ANCHORED | PCRE2_PARTIAL_HARD, md, NULL, ws, 4096) ==
               PCRE2_ERROR_PARTIAL;
    pcre2_match_data_free(md);
    return full ? (more ? DONE_OPEN : DONE) : more ? OPEN : REFUSED;
}

TEST(grammar_regex_matches_what_pcre2_matches) {
    static const char *RE[] = {
        "[0-9]{3}-[0-9]{4}", "\\d+(\\.\\d{1,2})?", "(cat|dog)s?", "[A-Z][a-z]*( [A-Z][a-z]*)*",
        "a.c", "\\w+@\\w+\\.(com|org)", "[^aeiou ]{2,4}", "(?:ab|cd)*e", "x{2,}y", "(?P<year>19|20)\\d\\d",
        "\\(\\d\\)\\[\\]\\{x\\}", "[-a-c\\]]+", "caf\xc3\xa9|na\\u00efve", "\\s*\\S\\s*", "a{1,3}b{0,2}",
    };
    static const char *TEXT[] = { /* not "": PCRE2 reports no partial match of an empty text */
        "5", "555-1234", "555-12345", "55-1234", "3.14", "3.", "3.145", "10", "cat", "dogs", "cats!", "Hello World",
        "Hello world", "abc", "a\nc", "axc", "me@site.com", "me@site.net", "xyz", "bcdf", "bcdfg", "ae", "e", "abcde",
        "abcabe", "xxy", "xy", "xxxxy", "1999", "2024", "1899", "(1)[]{x}", "a-]", "abcd", "caf\xc3\xa9",
        "na\xc3\xafve",
        "  x ", "x y", "yes", "no", "a{,3}", "aaa", "aab", "abbb",
    };
    for (size_t i = 0; i < sizeof RE / sizeof *RE; i++) {
        char *gbnf = NULL;
        hearth_err err = {0};
        if (hearth_grammar_from_regex(&gbnf, RE[i], strlen(RE[i]), &err) != HEARTH_OK) {
            test_fail(__FILE__, __LINE__, "/%s/: %s", RE[i], err.msg);
            continue;
        }
        hearth_grammar *g = compile(gbnf);
        int ec;
        PCRE2_SIZE eo;
        pcre2_code *re = pcre2_compile((PCRE2_SPTR)RE[i], PCRE2_ZERO_TERMINATED,
                                       PCRE2_UTF | PCRE2_ALT_BSUX | PCRE2_DOLLAR_ENDONLY, &ec, &eo, NULL);
        CHECK(re != NULL);
        for (size_t k = 0; g && re && k < sizeof TEXT / sizeof *TEXT; k++) {
            int want = pcre_class(re, TEXT[k]), got = classify(g, TEXT[k], 1);
            if (want != got)
                test_fail(__FILE__, __LINE__, "/%s/ on '%s': grammar %d, PCRE2 %d (%s)", RE[i], TEXT[k], got, want,
                          gbnf);
        }
        pcre2_code_free(re);
        hearth_grammar_free(g);
        free(gbnf);
    }
    /* where PCRE2 is not the oracle: {,n} is {0,n}, as Python's re (vLLM's)
     * reads it; ^ and $ at the ends (which PCRE2's partial matching takes as
     * text that may go on) */
    static const struct {
        const char *re, *text;
        int want;
    } MORE[] = {{"a{,3}", "aaa", DONE},  {"a{,3}", "aaaa", REFUSED}, {"a{,3}", "", DONE_OPEN},
                {"^yes$|^no$", "yes", DONE}, {"^yes$|^no$", "n", OPEN}, {"^yes$|^no$", "yes\n", REFUSED},
                {"(a?){2,3}b", "b", DONE},  {"(a?){2,3}b", "aaab", DONE}, {"(a?){2,3}b", "aaaab", REFUSED}};
    for (size_t i = 0; i < sizeof MORE / sizeof *MORE; i++) {
        char *gbnf = NULL;
        hearth_err err = {0};
        CHECK_EQ(hearth_grammar_from_regex(&gbnf, MORE[i].re, strlen(MORE[i].re), &err), HEARTH_OK);
        hearth_grammar *g = gbnf ? compile(gbnf) : NULL;
        if (g && classify(g, MORE[i].text, 0) != MORE[i].want)
            test_fail(__FILE__, __LINE__, "/%s/ on '%s': %d, expected %d", MORE[i].re, MORE[i].text,
                      classify(g, MORE[i].text, 0), MORE[i].want);
        hearth_grammar_free(g);
        free(gbnf);
    }
}

TEST(grammar_regex_refuses_by_name) {
    static const struct {
        const char *re, *msg;
        hearth_status st;
    } BAD[] = {
        {"(a)\\1", "backreferences", HEARTH_ENOTSUP},  {"a(?=b)", "lookaround", HEARTH_ENOTSUP},
        {"\\bword", "word boundaries", HEARTH_ENOTSUP}, {"a++", "possessive", HEARTH_ENOTSUP},
        {"(ab", "without its ')'", HEARTH_EINVAL},     {"ab)", "unmatched ')'", HEARTH_EINVAL},
        {"[a-", "without its ']'", HEARTH_EINVAL},     {"*a", "with nothing before it", HEARTH_EINVAL},
        {"a**", "a quantifier after a quantifier", HEARTH_EINVAL}, {"a^b", "inside the expression", HEARTH_ENOTSUP},
        {"(a?)*", "can match nothing", HEARTH_ENOTSUP},      {"x(a|)+", "can match nothing", HEARTH_ENOTSUP},
        {"((b*)c?){3,}", "can match nothing", HEARTH_ENOTSUP},
    };
    for (size_t i = 0; i < sizeof BAD / sizeof *BAD; i++) {
        char *gbnf = NULL;
        hearth_err err = {0};
        hearth_status st = hearth_grammar_from_regex(&gbnf, BAD[i].re, strlen(BAD[i].re), &err);
        if (st != BAD[i].st || gbnf || !strstr(err.msg, BAD[i].msg))
            test_fail(__FILE__, __LINE__, "/%s/: status %d, '%s', expected '%s'", BAD[i].re, (int)st, err.msg,
                      BAD[i].msg);
        free(gbnf);
    }
}

/* Grammars and regular expressions are request input: random sources made of
 * their pieces either compile or are refused with a message, and whatever
 * compiles follows random texts without a crash (make asan runs this). */
static uint64_t fz_next(uint64_t *s) {
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}

TEST(grammar_random_sources_never_crash) {
    static const char *G[] = {"root", " ::= ", "a", " ::= ", "\"x\"", "\"\\u00e9\"", "[a-c]", "[^\"]", ".", "(", ")",
                              " | ", "*", "+", "?", "{2,3}", "{,2}", "\n", " ", "#c\n", "\"", "[", "\\", "b", "{9999}"};
    static const char *X[] = {"a", "b", "(", ")", "|", "*", "+", "?", "[a-c]", "[^a]", ".", "\\d", "\\w", "{2}",
                              "{1,}", "^", "$", "\\", "(?:", "(?P<n>", "\xc3\xa9", "{", "]", "-"};
    static const char *T[] = {"x", "a", "b", "c", "\xc3\xa9", "\xc3", "\"", "\n", "(", ")", "7"};
    uint64_t seed = 0x9e3779b97f4a7c15u;
    int compiled = 0, rx_ok = 0;
    for (int round = 0; round < 3000; round++) {
        char src[512] = "";
        int grammar = round % 2 == 0, n = 1 + (int)(fz_next(&seed) % 24);
        if (grammar) strcat(src, "root ::= ");
        for (int i = 0; i < n; i++) {
            const char *piece = grammar ? G[fz_next(&seed) % (sizeof G / sizeof *G)]
                                        : X[fz_next(&seed) % (sizeof X / sizeof *X)];
            if (strlen(src) + strlen(piece) < sizeof src) strcat(src, piece);
        }
        hearth_err err = {0};
        char *gbnf = NULL;
        hearth_grammar *g = NULL;
        hearth_status st = grammar ? hearth_grammar_compile(&g, src, strlen(src), &err)
                                   : hearth_grammar_from_regex(&gbnf, src, strlen(src), &err);
        if (!grammar && st == HEARTH_OK) {
            rx_ok++;
            st = hearth_grammar_compile(&g, gbnf, strlen(gbnf), &err);
            if (st != HEARTH_OK && !strstr(err.msg, "repetition count")) /* never left-recursive */
                test_fail(__FILE__, __LINE__, "/%s/ rewrote to GBNF that does not compile (%s): %s", src, err.msg,
                          gbnf);
        }
        free(gbnf);
        if (st != HEARTH_OK) {
            CHECK(!g && err.msg[0]);
            continue;
        }
        compiled++;
        for (int t = 0; t < 4; t++) {
            char text[64] = "";
            for (int k = (int)(fz_next(&seed) % 8); k > 0; k--)
                strcat(text, T[fz_next(&seed) % (sizeof T / sizeof *T)]);
            classify(g, text, (int)(fz_next(&seed) % 2));
        }
        hearth_grammar_free(g);
    }
    printf("  %d of 3000 sources compiled (%d regexes rewritten)\n", compiled, rx_ok);
    CHECK(compiled > 100);
}
