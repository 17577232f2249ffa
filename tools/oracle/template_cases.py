#!/usr/bin/env python3
"""template_cases.py - interpreter goldens: small templates, one feature each.

Renders every (template, context) pair below with transformers' chat-template
environment (the same compiled environment template_goldens.py uses) and writes
tests/fixtures/templates/unit/cases.json: {"now", "context", "cases": [{"template",
"expected"} or {"template", "error"}]}; strftime_now is fixed to "now" as in
template_goldens.py. tests/unit/test_template.c renders each
with hearth_tmpl_render and requires the same bytes, or an error.

Usage: .venv/bin/python tools/oracle/template_cases.py
"""
import json
import pathlib

from template_goldens import NOW_UNIX, ctu  # also fixes strftime_now's clock

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "fixtures" / "templates" / "unit" / "cases.json"

CTX = {
    "msgs": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"},
             {"role": "assistant", "content": "yo", "tool_calls": [{"function": {"name": "f", "arguments": {"x": 1}}}]}],
    "d": {"b": 2, "a": 1, "c": {"x": [1, 2]}},
    "s": "  Hello, World  ",
    "n": 7, "f": 2.5, "neg": -3, "t": True, "no": None, "empty": [], "es": "",
    "words": ["banana", "Apple", "cherry", "apple"],
    "nums": [3, 1, 2], "u": "héllo wörld ünïcode 😀",
}

CASES = [
    # output and literals
    "{{ 'a' }}{{ \"b\" }}{{ 1 }}{{ 1.5 }}{{ -2 }}{{ true }}{{ none }}{{ True }}{{ False }}{{ None }}",
    "{{ [1, 'two', none, true, 1.0, [2], {'k': 'v'}] }}",
    "{{ (1, 2) }}{{ (1,) }}{{ () }}{{ {} }}{{ {'a': 1, 'b': [1, 2]} }}",
    "{{ 'it''s' }}{{ \"it's\" }}{{ 'say \"hi\"' }}{{ ['it\\'s', \"x\\ny\", 'tab\\t'] }}",
    "{{ '\\u00e9\\x41\\101\\n' }}|{{ 'a' 'b' }}",
    "{{ 1e3 }} {{ 1.0e-5 }} {{ 0.1 + 0.2 }} {{ 1_000 }} {{ 0x1f }} {{ 10 / 4 }} {{ 1e16 }} {{ 123456789.123 }}",
    "{{ undefined_thing }}|{{ d.missing }}|{{ msgs[10] }}",
    # arithmetic and operators
    "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 7.5 // 2 }} {{ 3 * 'ab' }} {{ [1] * 3 }}",
    "{{ 1 + 2 * 3 - 4 }} {{ (1 + 2) * 3 }} {{ 'a' ~ 1 ~ none ~ true }} {{ 'x' + 'y' }} {{ [1] + [2] }} {{ -n }} {{ +f }}",
    "{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 == 1.0 }} {{ 'a' != 'b' }} {{ 'b' >= 'a' }} {{ [1, 2] < [1, 3] }}",
    "{{ 'ell' in 'hello' }} {{ 2 in nums }} {{ 'a' in d }} {{ 'z' not in d }} {{ 5 not in nums }} {{ 'x' in undefined_thing }}",
    "{{ true and 'yes' }} {{ false or 'fallback' }} {{ not none }} {{ 0 or '' or 'last' }} {{ 'a' and 0 }}",
    "{{ 'yes' if t else 'no' }} {{ 'yes' if no else 'no' }} [{{ 'only' if no }}] {{ 1 if 0 else 2 if 0 else 3 }}",
    "{{ 'a' + 1 }}",
    "{{ 1 / 0 }}",
    "{{ 'a' < 1 }}",
    "{{ undefined_thing.attr }}",
    "{{ undefined_thing + 1 }}",
    # attribute / subscript / slices
    "{{ d.a }} {{ d['b'] }} {{ d.c.x[1] }} {{ d['c']['x'][-1] }} {{ msgs[0].role }} {{ msgs[-1]['tool_calls'][0].function.name }}",
    "{{ nums[1:] }} {{ nums[:-1] }} {{ nums[::-1] }} {{ nums[::2] }} {{ s[2:7] }} {{ u[1:4] }} {{ u[::-1] }} {{ 'abc'[5:] }}",
    "{{ msgs.0.role }} {{ d.items()|length }} {{ d.items() }}",
    # tests
    "{{ n is defined }} {{ zz is defined }} {{ zz is undefined }} {{ no is none }} {{ n is number }} {{ f is float }} {{ n is integer }} {{ t is boolean }}",
    "{{ s is string }} {{ d is mapping }} {{ nums is iterable }} {{ nums is sequence }} {{ s is sequence }} {{ n is iterable }} {{ t is true }} {{ 1 is true }} {{ no is false }}",
    "{{ n is odd }} {{ n is even }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(4) }} {{ n is equalto 7 }} {{ n is eq 8 }} {{ 'A' is upper }} {{ 'a' is lower }} {{ n is not none }}",
    "{{ n is gt 3 }} {{ n is lt 3 }} {{ n is ge 7 }} {{ n is le 6 }} {{ n is ne 7 }} {{ 2 is in nums }} {{ no is sameas none }}",
    "{{ zz is mapping }} {{ zz is iterable }} {{ zz is string }} {{ zz is none }}",
    # filters
    "{{ s|trim }}|{{ s|trim('  Hd') }}|{{ s|upper }}|{{ s|lower }}|{{ 'hello wORLD-x (y)'|title }}|{{ 'hELLO wORLD'|capitalize }}",
    "{{ d|length }} {{ nums|count }} {{ s|length }} {{ u|length }} {{ zz|length }} {{ nums|first }} {{ nums|last }} {{ 'abc'|first }} {{ empty|first }}",
    "{{ words|sort }} {{ words|sort(reverse=true) }} {{ words|sort(case_sensitive=true) }} {{ nums|sort|list }} {{ msgs|sort(attribute='role')|map(attribute='role')|list }}",
    "{{ words|unique|list }} {{ words|unique(case_sensitive=true)|list }} {{ nums|reverse|list }} {{ 'abc'|reverse }} {{ words|join(', ') }} {{ nums|join }}",
    "{{ d|dictsort }} {{ d|dictsort(reverse=true) }} {{ d|items|list }} {{ d.items()|list }} {{ d.keys()|list }} {{ d.values()|list }}",
    "{{ msgs|selectattr('role', 'equalto', 'user')|list }} {{ msgs|rejectattr('role', 'in', ['system', 'user'])|map(attribute='content')|list }}",
    "{{ msgs|selectattr('tool_calls')|list|length }} {{ msgs|map(attribute='role')|join('/') }} {{ msgs|map(attribute='name', default='?')|list }}",
    "{{ nums|select('odd')|list }} {{ nums|reject('odd')|list }} {{ words|map('upper')|list }} {{ [1, 0, none, 'a']|select|list }}",
    "{{ zz|default('dflt') }} {{ es|default('dflt') }} {{ es|default('dflt', true) }} {{ no|d('x') }} {{ n|default(0) }}",
    "{{ '42'|int }} {{ '4.7'|int }} {{ 'x'|int }} {{ 'x'|int(5) }} {{ 3.9|int }} {{ '2.5'|float }} {{ 'x'|float }} {{ 3|float }} {{ 'ff'|int(base=16) }}",
    "{{ f|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 3.14159|round(3) }} {{ 2.1|round(method='ceil') }} {{ 2.9|round(method='floor') }} {{ neg|abs }} {{ -2.5|abs }}",
    "{{ nums|sum }} {{ [1.5, 2]|sum }} {{ nums|max }} {{ nums|min }} {{ words|max }} {{ words|min }}",
    "{{ n|string }} {{ nums|string }} {{ no|string }} {{ t|string ~ '!' }} {{ s|replace('l', 'L') }} {{ s|replace('l', 'L', 1) }}",
    "{{ 'a\\nb\\n\\nc'|indent }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent(2, blank=true) }}|{{ 'x\\ny'|indent('> ') }}",
    "{{ nums|batch(2)|list }} {{ nums|batch(2, 0)|list }} {{ 'one two  three'|wordcount }} {{ '<a href=\"x\">&</a>'|e }} {{ '<b>'|safe }}",
    "{{ msgs|tojson }}",
    "{{ d|tojson(indent=2) }}",
    "{{ {'b': 1, 'a': [1.0, 'é', '\"q\"\\n', none, true]}|tojson(sort_keys=true) }}",
    "{{ u|tojson }} {{ u|tojson(ensure_ascii=true) }} {{ 'a/b<c>&'|tojson }} {{ [1, 2]|tojson(separators=(',', ':')) }}",
    "{{ msgs|items|list }}",
    "{{ zz|tojson }}",
    "{{ nums|map('upper')|list }}",
    "{{ (msgs|selectattr('role'))|tojson }}",
    "{{ msgs|selectattr('role')|length }}",
    "{{ '%s is %d years, %.2f%%'|format('Bob', 42, 99.5) }} {{ '%(a)s-%(b)s'|format(a=1, b=2) }}",
    "{{ '<x>'|safe + '<y>' }} {{ '<x>' + '<y>'|safe }} {{ ('<x>'|safe + '<y>')|length }} {{ '<x>'|escape|escape }}",
    # string methods
    "{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ 'xxhixx'.strip('x') }}|{{ s.upper() }}|{{ s.lower() }}|{{ 'they\\'re bill\\'s'.title() }}",
    "{{ 'a,b,,c'.split(',') }} {{ ' a  b c '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ ' a b  c '.rsplit(None, 1) }} {{ ' a b c '.split(None, 1) }} {{ 'l1\\nl2\\r\\nl3'.splitlines() }}",
    "{{ s.startswith('  He') }} {{ s.endswith('x') }} {{ 'abc'.startswith(('x', 'a')) }} {{ 'abc'.find('c') }} {{ 'abc'.find('z') }} {{ 'héllo'.find('l') }} {{ 'aaa'.count('a') }} {{ 'aXbXc'.replace('X', '-') }}",
    "{{ '{} and {}'.format('a', 'b') }} {{ '{1}{0}'.format('a', 'b') }} {{ '{x}!'.format(x=3) }} {{ '{{literal}}'.format() }} {{ '-'.join(['a', 'b']) }}",
    "{{ '123'.isdigit() }} {{ 'abc'.isalpha() }} {{ ' '.isspace() }} {{ 'Abc'.islower() }} {{ 'ABC'.isupper() }} {{ 'hello'.capitalize() }} {{ 'prefix-x'.removeprefix('prefix-') }} {{ '7'.zfill(3) }}",
    "{{ d.get('a') }} {{ d.get('zz') }} {{ d.get('zz', 'dflt') }} {{ nums.index(2) }} {{ nums.count(3) }}",
    "{{ nums.append(4) }}",
    "{{ d.update({'x': 1}) }}",
    "{{ nums.append }}|",
    # statements: if / for / loop
    "{% if n > 5 %}big{% elif n > 2 %}mid{% else %}small{% endif %} {% if no %}x{% elif empty %}y{% else %}z{% endif %}",
    "{% for m in msgs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}:{{ m.role }};{% endfor %}",
    "{% for x in nums %}[{{ loop.previtem }}|{{ loop.nextitem }}|{{ loop.cycle('a', 'b') }}|{{ loop.changed(x > 1) }}]{% endfor %}",
    "{% for x in empty %}never{% else %}else-branch{% endfor %}{% for x in zz %}never{% else %}undef-else{% endfor %}",
    "{% for x in nums if x > 1 %}{{ x }}/{{ loop.index }}/{{ loop.length }} {% endfor %}",
    "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k in d %}{{ k }}{% endfor %}{% for c in 'héllo' %}[{{ c }}]{% endfor %}",
    "{% for x in nums %}{% if x == 1 %}{% continue %}{% endif %}{% if x == 2 %}{% break %}{% endif %}{{ x }}{% endfor %}",
    "{% for a, b in [(1, 2), (3, 4)] %}{{ a + b }}{% endfor %} {% for (a, b) in [[5, 6]] %}{{ a * b }}{% endfor %}",
    "{% for a, b in [(1, 2, 3)] %}{% endfor %}",
    "{% for x in n %}{% endfor %}",
    "{% for x in no %}{% endfor %}",
    # set, scoping, namespace
    "{% set x = 1 %}{% for i in nums %}{{ x }}{% set x = i %}{{ x }} {% endfor %}{{ x }}",
    "{% set ns = namespace(found=false, count=0) %}{% for m in msgs %}{% if m.role == 'user' %}{% set ns.found = true %}{% endif %}{% set ns.count = ns.count + 1 %}{% endfor %}{{ ns.found }} {{ ns.count }}",
    "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t2 = (3, 4) %}{{ t2 }}{% set c = nums|length > 2 %}{{ c }}",
    "{% set block %}inside {{ n }}{% endset %}[{{ block }}]{% set up | upper %}shout{% endset %}{{ up }}",
    "{% if t %}{% set leaked = 'yes' %}{% endif %}{{ leaked }}",
    "{% set ns = namespace(items=[]) %}{% for x in nums %}{% set ns.items = ns.items + [x * 2] %}{% endfor %}{{ ns.items }}",
    "{% set ns = namespace() %}{% set ns.x %}blk{% endset %}{{ ns.x }}",
    "{% set notns = {} %}{% set notns.x = 1 %}",
    # macros, call, filter blocks
    "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('Ann') }} {{ greet('Bob', '?') }} {{ greet(punct='.', name='Cy') }} {{ greet() }}",
    "{% macro m(a) %}{{ a }}|{{ varargs }}|{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k=4) }}",
    "{% set g = 'outer' %}{% macro show() %}{{ g }}{% endmacro %}{% set g = 'changed' %}{{ show() }}{% for i in [1] %}{% set g = 'loop' %}{{ show() }}{% endfor %}",
    "{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}bold {{ n }}{% endcall %}",
    "{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}{% call(item) each(nums) %}<{{ item }}>{% endcall %}",
    "{% filter upper %}shout {{ s|trim }}{% endfilter %}|{% filter trim|title %}   two words   {% endfilter %}",
    "{% macro fact(k) %}{% if k <= 1 %}1{% else %}{{ k * fact(k - 1)|int }}{% endif %}{% endmacro %}{{ fact(5) }}",
    "{% with a = 1, b = n %}{{ a + b }}{% endwith %}{{ a }}",
    "{% generation %}gen {{ n }}{% endgeneration %}",
    # whitespace control
    "a  {{- ' b ' -}}  c\n  {%- if true -%}  d  {%- endif -%}  \ne",
    "line1\n    {% if true %}\n    inside\n    {% endif %}\nline2\n",
    "x {%+ if true %}y{% endif +%}\nz",
    "{# comment #}a\n  {# indented comment #}\nb {#- trimmed -#} c\n",
    "{% raw %}{{ not parsed }} {% if %}{% endraw %}|{%- raw -%}  x  {%- endraw -%}|",
    "keep trailing newline?\n\n",
    "{% if true %}\r\nwindows\r\n{% endif %}\r\n",
    # globals
    "{{ range(3)|list }} {{ range(1, 10, 3)|list }} {{ range(5, 0, -2)|list }} {{ dict(a=1, b=2) }} {{ namespace(a=1).a }}",
    "{{ raise_exception('custom failure: ' ~ n) }}",
    "{{ strftime_now('%Y-%m-%d %H:%M %b %d %A') }}",
    "{{ range(100001)|length }}",
]


def main():
    env_tmpl = ctu._compile_jinja_template
    out = []
    for src in CASES:
        case = {"template": src}
        try:
            case["expected"] = env_tmpl(src).render(**CTX)
        except Exception as e:
            case["error"] = f"{type(e).__name__}: {e}"
        out.append(case)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    doc = {"now": NOW_UNIX, "context": CTX, "cases": out}
    OUT.write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"{OUT.relative_to(ROOT)}: {len(out)} cases, {sum('error' in c for c in out)} errors")


if __name__ == "__main__":
    main()
