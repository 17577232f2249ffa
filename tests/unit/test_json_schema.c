/* test_json_schema.c - JSON Schema's automaton: what compiles (and what is
 * refused, naming the keyword), and which texts it takes, fed byte by byte:
 * each valid instance to its end (done exactly there), each invalid one
 * refused at some byte or left unfinished. The expectations are written by
 * hand from the JSON Schema spec. */
#include "testhelp.h"

#include "completion/json_internal.h"

#include <stdio.h>
#include <string.h>

static hearth_schema *compile(const char *src) {
    json_t *j = json_loads(src, 0, NULL);
    hearth_schema *s = NULL;
    hearth_err err = {0};
    if (!j || hearth_schema_compile(&s, j, &err) != HEARTH_OK)
        test_fail(__FILE__, __LINE__, "schema %s: %s", src, err.msg);
    json_decref(j);
    return s;
}

/* 1 if text is a whole instance: every byte taken and the value done at its end. */
static int takes(const hearth_schema *s, const char *text) {
    hearth_schema_state st;
    hearth_schema_init(s, &st);
    size_t n = strlen(text);
    for (size_t i = 0; i < n; i++) {
        if (!hearth_schema_step(s, &st, (uint8_t)text[i])) return 0;
        if (hearth_json_done(&st.j) != (i == n - 1) && hearth_json_done(&st.j)) return 0;
    }
    return hearth_json_done(&st.j);
}

static void expect(const hearth_schema *s, const char *text, int want, int line) {
    if (takes(s, text) != want) test_fail(__FILE__, line, "%s: %s (want %s)", text, want ? "refused" : "taken",
                                          want ? "taken" : "refused");
}
#define YES(s, t) expect(s, t, 1, __LINE__)
#define NO(s, t) expect(s, t, 0, __LINE__)

TEST(json_schema_objects_properties_required) {
    hearth_schema *s = compile("{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
                               "\"age\":{\"type\":\"integer\"},\"nick\":{\"type\":[\"string\",\"null\"]}},"
                               "\"required\":[\"name\",\"age\"],\"additionalProperties\":false}");
    if (!s) return;
    YES(s, "{\"name\":\"Bo\",\"age\":3}");
    YES(s, "{ \"age\" : -12 , \"name\" : \"\\u00e9\\\"\" , \"nick\" : null }");
    YES(s, "{\"name\":\"a\",\"age\":0,\"nick\":\"x\"}");
    NO(s, "{\"name\":\"Bo\"}");                    /* age is required */
    NO(s, "{\"name\":\"Bo\",\"age\":3.5}");        /* an integer */
    NO(s, "{\"name\":\"Bo\",\"age\":1e3}");        /* an integer */
    NO(s, "{\"name\":3,\"age\":3}");               /* a string */
    NO(s, "{\"name\":\"Bo\",\"age\":3,\"x\":1}");  /* no other property */
    NO(s, "{\"nam\":\"Bo\",\"age\":3}");           /* a prefix of a name is not the name */
    NO(s, "{\"name\":\"Bo\",\"name\":\"Al\",\"age\":3}"); /* given twice */
    NO(s, "{\"name\":\"Bo\",\"age\":3,\"nick\":true}");
    NO(s, "[]");
    hearth_schema_free(s);
}

TEST(json_schema_arrays_enums_anyof_refs) {
    hearth_schema *s = compile(
        "{\"type\":\"object\",\"properties\":{\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"red\",\"green\"]}},"
        "\"tree\":{\"$ref\":\"#/$defs/Node\"},\"flag\":{\"const\":true},\"n\":{\"type\":\"number\"}},"
        "\"required\":[\"tags\"],\"$defs\":{\"Node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},"
        "\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/Node\"}}},\"required\":[\"v\"],"
        "\"additionalProperties\":false}}}");
    if (!s) return;
    YES(s, "{\"tags\":[]}");
    YES(s, "{\"tags\":[\"red\",\"green\",\"red\"],\"flag\":true,\"n\":-1.5e-3}");
    YES(s, "{\"tags\":[\"red\"],\"tree\":{\"v\":1,\"kids\":[{\"v\":2,\"kids\":[]},{\"v\":3}]}}");
    YES(s, "{\"tags\":[],\"extra\":{\"anything\":[1,\"x\",null]}}"); /* additionalProperties absent: any */
    NO(s, "{\"tags\":[\"blue\"]}");
    NO(s, "{\"tags\":[\"re\"]}");
    NO(s, "{\"tags\":[\"redd\"]}");
    NO(s, "{\"tags\":[],\"flag\":false}");
    NO(s, "{\"tags\":[],\"tree\":{\"kids\":[]}}");          /* the node's v is required */
    NO(s, "{\"tags\":[],\"tree\":{\"v\":1,\"kids\":[{}]}}"); /* and in its kids */
    NO(s, "{\"tags\":[],\"tree\":{\"v\":1,\"w\":2}}");
    hearth_schema_free(s);
}

TEST(json_schema_refusals_name_the_problem) {
    static const struct {
        const char *schema, *needle;
    } cases[] = {
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"pattern\":\"x\"}}}", "'pattern'"},
        {"{\"type\":\"object\",\"minProperties\":1}", "'minProperties'"},
        {"{\"type\":\"string\"}", "root must be an object"},
        {"{\"type\":\"object\",\"required\":[\"a\"]}", "'a' is not among the properties"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"$ref\":\"#/$defs/X\"}}}", "not a definition"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"anyOf\":[{\"type\":\"object\"},{\"type\":\"object\"}]}}}",
         "same byte"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":[\"integer\",\"number\"]}}}", "same byte"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"enum\":[1,2]}}}", "only strings, booleans and null"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"strng\"}}}", "unknown type 'strng'"},
        {NULL, "more than 64 values"}, /* made below: an enum of 65 strings */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        json_t *j = cases[i].schema ? json_loads(cases[i].schema, 0, NULL)
                                    : json_pack("{s:s,s:{s:{s:[]}}}", "type", "object", "properties", "a", "enum");
        for (int k = 0; !cases[i].schema && k < 65; k++) {
            char name[8];
            snprintf(name, sizeof name, "v%d", k);
            json_array_append_new(json_object_get(json_object_get(json_object_get(j, "properties"), "a"), "enum"),
                                  json_string(name));
        }
        hearth_schema *s = NULL;
        hearth_err err = {0};
        int refused = hearth_schema_compile(&s, j, &err) != HEARTH_OK && strstr(err.msg, cases[i].needle);
        if (!refused)
            test_fail(__FILE__, __LINE__, "%s: '%s' (want it refused naming %s)",
                      cases[i].schema ? cases[i].schema : "(65 values)", err.msg, cases[i].needle);
        hearth_schema_free(s);
        json_decref(j);
    }
}
