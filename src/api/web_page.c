/* web_page.c - GET / and /index.html: the chat page (web/index.html),
 * compiled into the binary by the assembler's .incbin (the Makefile makes
 * this object depend on the page). Public, as /health is: the page asks for
 * the API key itself when the server has one, and sends it with each call. */
#include "api/api_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__asm__(".pushsection .rodata\n"
        ".global hearth_web_page\n"
        ".type hearth_web_page, @object\n"
        "hearth_web_page:\n"
        ".incbin \"web/index.html\"\n"
        ".global hearth_web_page_end\n"
        "hearth_web_page_end:\n"
        ".byte 0\n"
        ".popsection\n");
extern const char hearth_web_page[], hearth_web_page_end[];

void api_web_page(hearth_http_response *r) {
    size_t n = (size_t)(hearth_web_page_end - hearth_web_page);
    r->body = malloc(n + 1);
    if (!r->body) {
        api_error(r, 503, "unavailable_error", NULL, "out_of_memory", "out of memory");
        return;
    }
    memcpy(r->body, hearth_web_page, n + 1);
    r->len = n;
    r->status = 200;
    r->content_type = "text/html; charset=utf-8";
    r->hdr_name[0] = "Content-Security-Policy";
    snprintf(r->hdr_value[0], sizeof r->hdr_value[0], "default-src 'self' 'unsafe-inline'; img-src data:");
}
