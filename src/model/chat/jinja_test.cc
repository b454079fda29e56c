// Unit tests of the Jinja interpreter. Expected strings are what Python
// Jinja2 3.1 renders with trim_blocks and lstrip_blocks on.
#include <gtest/gtest.h>

#include <string>

#include "model/chat/jinja_interpreter.h"

namespace redline::model::chat::jinja {
namespace {

// Renders `source` with the given variables (a JSON-free Dict).
Result<std::string> Render(std::string_view source, const Dict& vars = {},
                           const RenderLimits& limits = {}) {
  RL_ASSIGN_OR_RETURN(auto t, Template::Parse(source));
  RenderOptions options;
  options.limits = limits;
  return t->Render(vars, options);
}

std::string R(std::string_view source, const Dict& vars = {}) {
  Result<std::string> r = Render(source, vars);
  if (!r.ok()) return "ERROR: " + r.status().message();
  return *r;
}

std::string Err(std::string_view source, const Dict& vars = {}) {
  Result<std::string> r = Render(source, vars);
  if (r.ok()) return "OK: " + *r;
  return r.status().message();
}

TEST(JinjaTest, Literals) {
  EXPECT_EQ(R("{{ 'a\\n\\tb' }}"), "a\n\tb");
  EXPECT_EQ(R("{{ \"x\" 'y' }}"), "xy");
  EXPECT_EQ(R("{{ 1 }} {{ 1.5 }} {{ 1.0 }} {{ 1e20 }} {{ 0.0001 }} {{ 1e-5 }}"),
            "1 1.5 1.0 1e+20 0.0001 1e-05");
  EXPECT_EQ(R("{{ true }} {{ False }} {{ none }} {{ None }}"),
            "True False None None");
  EXPECT_EQ(R("{{ [1, 'a', none, true] }}"), "[1, 'a', None, True]");
  EXPECT_EQ(R("{{ {'k': 'v', 'n': [1]} }}"), "{'k': 'v', 'n': [1]}");
  EXPECT_EQ(R("{{ (1, 2) }} {{ (1,) }} {{ () }}"), "(1, 2) (1,) ()");
  EXPECT_EQ(R("{{ \"it's\" }} {{ [\"it's\"] }} {{ ['a\\nb'] }}"),
            "it's [\"it's\"] ['a\\nb']");
  EXPECT_EQ(R("{{ '\\u00e9\\x41' }}"),
            "\xc3\xa9"
            "A");
}

TEST(JinjaTest, Arithmetic) {
  EXPECT_EQ(R("{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ "
              "7 % 3 }} {{ -7 % 3 }}"),
            "7 9 3 -4 1 2");
  EXPECT_EQ(
      R("{{ 7 / 2 }} {{ 4 / 2 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 7.5 // 2 }}"),
      "3.5 2.0 1024 0.5 3.0");
  EXPECT_EQ(R("{{ 'ab' * 3 }} {{ [1] * 2 }} {{ 'a' ~ 1 ~ none }}"),
            "ababab [1, 1] a1None");
  EXPECT_EQ(R("{{ 'a' + 1 ~ 2 }}"), "a12");  // ~ binds tighter than +
  EXPECT_EQ(R("{{ -2 ** 2 }}"),
            "4");  // Jinja: unary minus binds tighter than **
  EXPECT_EQ(R("{{ true + 1 }}"), "2");
  EXPECT_EQ(Err("{{ 1 / 0 }}"), "line 1: ZeroDivisionError: division by zero");
  EXPECT_EQ(Err("{{ 'a' + 1 }}"),
            "line 1: TypeError: can only concatenate str (not \"int\") to str");
  EXPECT_EQ(
      Err("{{ 'a' + none }}"),
      "line 1: TypeError: can only concatenate str (not \"NoneType\") to str");
  EXPECT_EQ(
      Err("{{ 1 + 'a' }}"),
      "line 1: TypeError: unsupported operand type(s) for +: 'int' and 'str'");
  EXPECT_EQ(
      Err("{{ 'a' + {} }}"),
      "line 1: TypeError: can only concatenate str (not \"dict\") to str");
}

TEST(JinjaTest, ComparisonsAndLogic) {
  EXPECT_EQ(
      R("{{ 1 < 2 < 3 }} {{ 1 < 2 > 3 }} {{ 1 == 1.0 }} {{ 'a' != 'b' }}"),
      "True False True True");
  EXPECT_EQ(R("{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 3 "
              "not in [1] }}"),
            "True True True True");
  EXPECT_EQ(R("{{ 0 or 'x' }} {{ 1 and 'y' }} {{ not 0 }} {{ '' or [] }}"),
            "x y True []");
  EXPECT_EQ(
      R("{{ 'y' if 1 else 'n' }} {{ 'y' if 0 else 'n' }} [{{ 'y' if 0 }}]"),
      "y n []");
  EXPECT_EQ(Err("{{ 'a' in none }}"),
            "line 1: TypeError: argument of type 'NoneType' is not iterable");
  EXPECT_EQ(Err("{{ 1 < 'a' }}"),
            "line 1: TypeError: '<' not supported between instances of 'int' "
            "and 'str'");
}

TEST(JinjaTest, WhitespaceControl) {
  EXPECT_EQ(R("a  {{- 'b' -}}  c"), "abc");
  EXPECT_EQ(R("a\n  {%- if true -%}\n  b\n  {%- endif -%}\n  c"), "abc");
  EXPECT_EQ(R("a {#- comment -#} b"), "ab");
  // trim_blocks: the newline after a block tag goes; lstrip_blocks: the
  // indentation before it goes.
  EXPECT_EQ(R("{% if true %}\n  x\n{% endif %}\ny"), "  x\ny");
  EXPECT_EQ(R("<ul>\n    {% for i in [1, 2] %}\n    <li>{{ i }}</li>\n    {% "
              "endfor %}\n</ul>"),
            "<ul>\n    <li>1</li>\n    <li>2</li>\n</ul>");
  // {{ }} is never lstripped, and neither is text before a tag mid-line.
  EXPECT_EQ(R("  {{ 1 }}\n  x {% if true %}y{% endif %}"), "  1\n  x y");
  EXPECT_EQ(R("{% if true +%}\nkeep{% endif %}"), "\nkeep");
  EXPECT_EQ(R("  {%+ if true %}x{% endif %}"), "  x");
  EXPECT_EQ(R("{# c #}\nx"), "x");
  // keep_trailing_newline off: one final newline is dropped.
  EXPECT_EQ(R("x\n"), "x");
  EXPECT_EQ(R("x\n\n"), "x\n");
  EXPECT_EQ(R("a\r\nb"), "a\nb");
  EXPECT_EQ(R("{% raw %}{{ x }}{% endraw %}"), "{{ x }}");
  EXPECT_EQ(R("{{ {'a': {'b': 1}} }}"), "{'a': {'b': 1}}");
}

TEST(JinjaTest, ForLoops) {
  EXPECT_EQ(R("{% for x in [1, 2, 3] %}{{ loop.index }}{{ loop.index0 }}{{ "
              "loop.revindex }}"
              "{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}"),
            "103TrueFalse3;212FalseFalse3;321FalseTrue3;");
  EXPECT_EQ(R("{% for x in [1, 2, 3] %}{{ loop.previtem }}-{{ loop.nextitem "
              "}};{% endfor %}"),
            "-2;1-3;2-;");
  EXPECT_EQ(R("{% for x in [] %}a{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(R("{% for x in range(6) if x is odd %}{{ x }}{{ loop.index }} {% "
              "endfor %}"),
            "11 32 53 ");
  EXPECT_EQ(R("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }} {% "
              "endfor %}"),
            "a=1 b=2 ");
  EXPECT_EQ(R("{% for k, v in {'a': 1}|items %}{{ k }}{{ v }}{% endfor %}"),
            "a1");
  EXPECT_EQ(R("{% for c in 'h\xc3\xa9' %}[{{ c }}]{% endfor %}"),
            "[h][\xc3\xa9]");
  EXPECT_EQ(R("{% for x in range(10) %}{% if x == 3 %}{% break %}{% endif %}{% "
              "if x is even %}"
              "{% continue %}{% endif %}{{ x }}{% endfor %}"),
            "1");
  EXPECT_EQ(R("{% for x in [1, 2] %}{{ loop.cycle('a', 'b') }}{% endfor %}"),
            "ab");
  EXPECT_EQ(R("{% for x in undefined_thing %}x{% endfor %}done"), "done");
  EXPECT_EQ(Err("{% for x in none %}x{% endfor %}"),
            "line 1: TypeError: 'NoneType' object is not iterable");
  // Loop scope: assignments inside do not leak out.
  EXPECT_EQ(R("{% set x = 0 %}{% for i in [1, 2] %}{{ x }}{% set x = i %}{{ x "
              "}}{% endfor %}{{ x }}"),
            "01020");
  EXPECT_EQ(R("{% for a in [1, 2] %}{% for b in 'xy' %}{{ loop.index }}{{ a "
              "}}{{ b }} {% endfor %}{% endfor %}"),
            "11x 21y 12x 22y ");
}

TEST(JinjaTest, RecursiveLoops) {
  EXPECT_EQ(R("{% for n in [{'v': 1, 'c': [{'v': 2, 'c': []}, {'v': 3}]}] "
              "recursive %}"
              "{{ n.v }}@{{ loop.depth }}({{ loop(n.c) }}){% endfor %}"),
            "1@1(2@2()3@2())");
  EXPECT_EQ(Err("{% for x in [1] %}{{ loop([2]) }}{% endfor %}"),
            "line 1: TypeError: The loop must have the 'recursive' marker to "
            "be called recursively.");
  // Unbounded recursion is stopped.
  Result<std::string> r =
      Render("{% for x in [1] recursive %}{{ loop([1]) }}{% endfor %}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
}

TEST(JinjaTest, LoopElseBreaksTheEnclosingLoop) {
  EXPECT_EQ(R("{% for a in [1, 2, 3] %}{{ a }}{% for b in [] %}{% else %}{% if "
              "a == 2 %}{% break %}"
              "{% endif %}{% endfor %}{% endfor %}"),
            "12");
}

TEST(JinjaTest, SetAndNamespace) {
  EXPECT_EQ(R("{% set a, b = 1, 2 %}{{ a }}{{ b }}"), "12");
  EXPECT_EQ(R("{% set ns = namespace(n=0) %}{% for i in [1, 2, 3] %}{% set "
              "ns.n = ns.n + i %}{% endfor %}"
              "{{ ns.n }}"),
            "6");
  EXPECT_EQ(R("{% set x %}a{{ 1 + 1 }}b{% endset %}[{{ x }}]"), "[a2b]");
  EXPECT_EQ(R("{% set x | upper %}abc{% endset %}{{ x }}"), "ABC");
  EXPECT_EQ(R("{% filter upper %}hi {{ 'there' }}{% endfilter %}"), "HI THERE");
  EXPECT_EQ(R("{% with a = 5 %}{{ a }}{% endwith %}[{{ a }}]"), "5[]");
  EXPECT_EQ(Err("{% set x = 1 %}{% set x.y = 2 %}"),
            "line 1: TemplateRuntimeError: cannot assign attribute on "
            "non-namespace object");
}

TEST(JinjaTest, Macros) {
  EXPECT_EQ(R("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% "
              "endmacro %}"
              "{{ greet('Bob') }} {{ greet('Al', punct='?') }} {{ "
              "greet(punct='.', name='X') }}"),
            "Hi Bob! Hi Al? Hi X.");
  EXPECT_EQ(R("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif "
              "%}{% endmacro %}{{ f(3) }}"),
            "321");
  EXPECT_EQ(R("{% macro f(a) %}[{{ a }}]{% endmacro %}{{ f() }}"), "[]");
  EXPECT_EQ(R("{% macro f() %}{{ varargs|length }}{{ kwargs }}{% endmacro %}{{ "
              "f(1, 2, k=3) }}"),
            "2{'k': 3}");
  EXPECT_EQ(Err("{% macro f(a) %}{% endmacro %}{{ f(1, 2) }}"),
            "line 1: TypeError: macro 'f' takes not more than 1 argument(s)");
  // A macro defined in a loop sees that iteration's variables.
  EXPECT_EQ(R("{% for i in [1, 2] %}{% macro f() %}<{{ i }}>{% endmacro %}{{ "
              "f() }}{% endfor %}"),
            "<1><2>");
  EXPECT_EQ(R("{% macro f() %}x{% endmacro %}{{ f }}"), "<Macro 'f'>");
  // Macros see globals, not the caller's locals.
  EXPECT_EQ(R("{% set g = 'G' %}{% macro f() %}{{ g }}{{ i }}{% endmacro %}{% "
              "for i in [1] %}{{ f() }}{% endfor %}"),
            "G");
}

TEST(JinjaTest, UndefinedSemantics) {
  EXPECT_EQ(R("[{{ nope }}]"), "[]");
  EXPECT_EQ(R("{{ nope is defined }} {{ nope is undefined }} {{ nope|length }} "
              "{{ 'x' ~ nope }}"),
            "False True 0 x");
  EXPECT_EQ(R("{{ 'a' in nope }} {{ nope == nope }} {{ not nope }} {{ "
              "nope|default('d') }}"),
            "False True True d");
  EXPECT_EQ(R("{% set d = {'a': 1} %}{{ d.b is defined }}[{{ d.b }}]{{ d['b'] "
              "is defined }}"),
            "False[]False");
  EXPECT_EQ(R("{{ nope|trim }}|{{ nope|upper }}|{{ nope|join(',') }}|{{ "
              "nope|list }}"),
            "|||[]");
  EXPECT_EQ(Err("{{ nope + 1 }}"),
            "line 1: UndefinedError: 'nope' is undefined");
  EXPECT_EQ(Err("{{ nope.attr }}"),
            "line 1: UndefinedError: 'nope' is undefined");
  EXPECT_EQ(Err("{% set d = {} %}\n{{ d.x.y }}"),
            "line 2: UndefinedError: 'dict object' has no attribute 'x'");
  EXPECT_EQ(Err("{{ [1][5].x }}"),
            "line 1: UndefinedError: list object has no element 5");
  EXPECT_EQ(Err("{{ 'a' + nope }}"),
            "line 1: UndefinedError: 'nope' is undefined");
  EXPECT_EQ(R("{{ none.attr is defined }}"), "False");
}

TEST(JinjaTest, Tests) {
  EXPECT_EQ(R("{{ 'a' is string }}{{ 1 is number }}{{ 1 is integer }}{{ 1.0 is "
              "float }}{{ true is boolean }}"
              "{{ {} is mapping }}{{ [] is iterable }}{{ 'x' is iterable }}{{ "
              "1 is iterable }}"),
            "TrueTrueTrueTrueTrueTrueTrueTrueFalse");
  EXPECT_EQ(R("{{ [] is sequence }}{{ none is none }}{{ true is true }}{{ 0 is "
              "false }}{{ 2 is even }}"
              "{{ 3 is odd }}{{ 'a' is eq 'a' }}{{ 'a' is equalto('b') }}{{ 6 "
              "is divisibleby 3 }}"),
            "TrueTrueTrueFalseTrueTrueTrueFalseTrue");
  EXPECT_EQ(
      R("{{ 1 is not string }}{{ not 1 is string }}{{ true is integer }}"),
      "TrueTrueFalse");
  EXPECT_EQ(Err("{{ 1 is frobnicated }}"),
            "line 1: no test named 'frobnicated'");
}

TEST(JinjaTest, StringFilters) {
  EXPECT_EQ(R("[{{ '  x y \\n'|trim }}]{{ 'ab'|upper }}{{ 'AB'|lower }}{{ "
              "'hello WORLD'|capitalize }}"),
            "[x y]ABabHello world");
  EXPECT_EQ(
      R("{{ 'hello big-world (x)'|title }}|{{ \"they're bill's\".title() }}"),
      "Hello Big-World (X)|They'Re Bill'S");
  EXPECT_EQ(R("{{ 'aaa'|replace('a', 'b') }} {{ 'aaa'|replace('a', 'b', 2) }}"),
            "bbb bba");
  EXPECT_EQ(R("{{ 'a\\nb'|indent(2) }}|{{ 'a\\nb'|indent(2, true) }}|{{ "
              "'a\\n\\nb'|indent(2) }}"),
            "a\n  b|  a\n  b|a\n\n  b");
  EXPECT_EQ(R("{{ 'a\\n\\nb'|indent(width=2, blank=true) }}"), "a\n  \n  b");
  EXPECT_EQ(R("{{ 'x'|center(5) }}|{{ '%s-%d'|format('a', 3) }}|{{ 'a b  "
              "c'|wordcount }}"),
            "  x  |a-3|3");
  EXPECT_EQ(R("{{ 'hello world foo'|truncate(9) }}|{{ 'hello world foo "
              "bar'|truncate(12, true) }}"),
            "hello...|hello wor...");
  EXPECT_EQ(
      R("{{ '<a>'|e }} {{ '<a>'|safe }} {{ 'x'|string }} {{ 42|string }}"),
      "&lt;a&gt; <a> x 42");
}

TEST(JinjaTest, Markup) {
  // A safe string concatenated with a plain one escapes the plain one.
  EXPECT_EQ(R("{{ 'a'|safe + '<\"b\">' }}|{{ '<x>' + 'y'|safe }}|{{ 'a'|safe ~ "
              "'<b>' }}"),
            "a&lt;&#34;b&#34;&gt;|&lt;x&gt;y|a<b>");
}

TEST(JinjaTest, SequenceFilters) {
  EXPECT_EQ(R("{{ [3, 1, 2]|sort }} {{ [3, 1, 2]|sort(reverse=true) }} {{ "
              "['b', 'A', 'c']|sort }}"),
            "[1, 2, 3] [3, 2, 1] ['A', 'b', 'c']");
  EXPECT_EQ(R("{{ [{'n': 2}, {'n': "
              "1}]|sort(attribute='n')|map(attribute='n')|list }}"),
            "[1, 2]");
  EXPECT_EQ(R("{{ [1, 2, 3]|first }}{{ [1, 2, 3]|last }}{{ [1, 2]|length }}{{ "
              "'abc'|count }}"),
            "1323");
  EXPECT_EQ(R("{{ [1, 2, 3]|join('-') }} {{ [{'a': 'x'}, {'a': 'y'}]|join(',', "
              "attribute='a') }}"),
            "1-2-3 x,y");
  EXPECT_EQ(R("{{ [1, 2, 3]|reverse|list }} {{ 'abc'|reverse }} {{ [1, 2, "
              "1]|unique|list }}"),
            "[3, 2, 1] cba [1, 2]");
  EXPECT_EQ(R("{{ [1, 2, 3]|sum }} {{ [1, 5, 3]|max }} {{ [4, 2, 8]|min }} {{ "
              "[-3]|first|abs }}"),
            "6 5 2 3");
  EXPECT_EQ(R("{{ ['a', 'b']|map('upper')|join }} {{ [1, 2, 3, "
              "4]|select('even')|list }}"
              " {{ [1, 2, 3]|reject('odd')|list }}"),
            "AB [2, 4] [2]");
  EXPECT_EQ(
      R("{% set xs = [{'t': 'a', 'v': 1}, {'t': 'b', 'v': 2}, {'v': 3}] %}"
        "{{ xs|selectattr('t', 'equalto', 'a')|list }} {{ "
        "xs|rejectattr('t')|map(attribute='v')|list }}"
        " {{ xs|selectattr('t', 'defined')|list|length }}"),
      "[{'t': 'a', 'v': 1}] [3] 2");
  EXPECT_EQ(
      R("{{ {'b': 1, 'a': 2}|dictsort }} {{ {'b': 1, 'a': 2}|items|list }}"),
      "[('a', 2), ('b', 1)] [('b', 1), ('a', 2)]");
  EXPECT_EQ(R("{{ [1, 2, 3, 4, 5]|batch(2)|list }} {{ 'ab'|list }} {{ {'k': "
              "1}|list }}"),
            "[[1, 2], [3, 4], [5]] ['a', 'b'] ['k']");
  EXPECT_EQ(R("{{ none|selectattr('x')|list }} {{ none|map('upper')|list }}"),
            "[] []");
  // Generators are always truthy and have no len().
  EXPECT_EQ(R("{{ 'y' if [1]|select('even') else 'n' }}"), "y");
  EXPECT_EQ(Err("{{ [1]|select('odd')|length }}"),
            "line 1: TypeError: object of type 'generator' has no len()");
}

TEST(JinjaTest, NumberFilters) {
  EXPECT_EQ(R("{{ '42'|int }} {{ '4.7'|int }} {{ 'x'|int }} {{ 'x'|int(7) }} "
              "{{ 3.9|int }} {{ '0x1A'|int(0, 16) }}"),
            "42 4 0 7 3 26");
  EXPECT_EQ(R("{{ '1.5'|float }} {{ 'x'|float }} {{ 2|float }}"),
            "1.5 0.0 2.0");
  EXPECT_EQ(R("{{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 3|round "
              "}} {{ 2.1|round(0, 'ceil') }}"),
            "2.0 4.0 2.67 3 3.0");
  EXPECT_EQ(R("{{ '1a'|int(base=16) }}"), "26");
}

TEST(JinjaTest, ToJson) {
  const char* obj =
      "{% set x = {'b': [1, 2.5, none, true], 'a': 'é<>&\\'\"\\n', 'c': {}} %}";
  EXPECT_EQ(
      R(std::string(obj) + "{{ x|tojson }}"),
      "{\"b\": [1, 2.5, null, true], \"a\": \"é<>&'\\\"\\n\", \"c\": {}}");
  EXPECT_EQ(R(std::string(obj) + "{{ x|tojson(indent=2) }}"),
            "{\n  \"b\": [\n    1,\n    2.5,\n    null,\n    true\n  ],\n  "
            "\"a\": \"é<>&'\\\"\\n\",\n  \"c\": {}\n}");
  EXPECT_EQ(R(std::string(obj) + "{{ x|tojson(2) == x|tojson(indent=2) }}"),
            "True");
  EXPECT_EQ(
      R(std::string(obj) + "{{ x|tojson(sort_keys=true) }}"),
      "{\"a\": \"é<>&'\\\"\\n\", \"b\": [1, 2.5, null, true], \"c\": {}}");
  EXPECT_EQ(R("{{ {'a': [1, 2]}|tojson(separators=(',', ':')) }}"),
            "{\"a\":[1,2]}");
  EXPECT_EQ(R("{{ 'é'|tojson(ensure_ascii=true) }} {{ "
              "'😀'|tojson(ensure_ascii=true) }}"),
            "\"\\u00e9\" \"\\ud83d\\ude00\"");
  EXPECT_EQ(
      Err("{{ nope|tojson }}"),
      "line 1: TypeError: Object of type Undefined is not JSON serializable");
}

TEST(JinjaTest, SlicingAndIndexing) {
  EXPECT_EQ(R("{{ [1, 2, 3, 4][1:3] }} {{ [1, 2, 3][::-1] }} {{ [1, 2, 3][-1] "
              "}} {{ [1, 2, 3, 4][::2] }}"),
            "[2, 3] [3, 2, 1] 3 [1, 3]");
  EXPECT_EQ(R("{{ 'hello'[1:] }} {{ 'hello'[-3:] }} {{ 'h\xc3\xa9llo'[1] }} {{ "
              "'h\xc3\xa9llo'[:2] }}"),
            "ello llo \xc3\xa9 h\xc3\xa9");
  EXPECT_EQ(R("{{ [1, 2][5:] }} {{ 'abc'[10] is defined }} {{ [1, 2].0 }}"),
            "[] False 1");
}

TEST(JinjaTest, StringMethods) {
  EXPECT_EQ(R("[{{ '  a  '.strip() }}][{{ 'xxaxx'.strip('x') }}][{{ "
              "'\\n\\na'.lstrip('\\n') }}][{{ 'a  '.rstrip() }}]"),
            "[a][a][a][a]");
  EXPECT_EQ(R("{{ 'a,b,c'.split(',') }} {{ 'a b  c'.split() }} {{ "
              "'a,b,c'.split(',', 1) }} {{ 'a,b,c'.rsplit(',', 1) }}"),
            "['a', 'b', 'c'] ['a', 'b', 'c'] ['a', 'b,c'] ['a,b', 'c']");
  EXPECT_EQ(R("{{ 'abc'.startswith('ab') }} {{ 'abc'.endswith(('x', 'c')) }} "
              "{{ 'abc'.find('c') }} {{ 'aXa'.count('a') }}"),
            "True True 2 2");
  EXPECT_EQ(R("{{ 'Ab'.upper() }}{{ 'Ab'.lower() }}{{ 'ab'.replace('b', 'c') "
              "}}{{ '-'.join(['a', 'b']) }}"),
            "ABabaca-b");
  EXPECT_EQ(R("{{ '{} and {name}'.format(1, name='x') }} {{ '%s=%d' % ('a', 1) "
              "}} {{ '%.2f' % 3.14159 }}"),
            "1 and x a=1 3.14");
  EXPECT_EQ(R("{{ '<think>x</think>y'.split('</think>')[-1] }}"), "y");
}

TEST(JinjaTest, DictMethods) {
  EXPECT_EQ(R("{% set d = {'a': 1, 'b': 2} %}{{ d.keys()|list }} {{ "
              "d.values()|list }} {{ d.get('a') }}"
              " {{ d.get('z') }} {{ d.get('z', 9) }} {{ d['a'] }} {{ d.a }}"),
            "['a', 'b'] [1, 2] 1 None 9 1 1");
  // The immutable sandbox refuses mutation.
  EXPECT_EQ(Err("{% set l = [] %}{{ l.append(1) }}"),
            "line 1: SecurityError: access to attribute 'append' of 'list' "
            "object is unsafe.");
}

TEST(JinjaTest, Globals) {
  EXPECT_EQ(R("{{ range(3)|list }} {{ range(1, 10, 3)|list }} {{ dict(a=1) }}"),
            "[0, 1, 2] [1, 4, 7] {'a': 1}");
  EXPECT_EQ(R("{% set j = joiner('|') %}{% for x in 'ab' %}{{ j() }}{{ x }}{% "
              "endfor %}"),
            "a|b");
  EXPECT_EQ(Err("{{ raise_exception('Bad role: ' ~ 'x') }}"), "Bad role: x");
  EXPECT_EQ(Err("{{ range(1000000)|length }}"),
            "line 1: OverflowError: Range too big. The sandbox blocks ranges "
            "larger than MAX_RANGE (100000).");
}

TEST(JinjaTest, ParseErrors) {
  EXPECT_EQ(Err("{% if x %}a"),
            "line 1: unexpected end of template, expected 'elif' or 'else' or "
            "'endif'");
  EXPECT_EQ(Err("\n\n{% include 'x' %}"), "line 3: unsupported tag 'include'");
  EXPECT_EQ(Err("{% frob %}"), "line 1: unknown tag 'frob'");
  EXPECT_EQ(Err("{{ 1 + }}"), "line 1: unexpected end of print statement");
  EXPECT_EQ(Err("{{ 'abc }}"), "line 1: unterminated string");
  EXPECT_EQ(Err("{% break %}"), "line 1: 'break' outside of a loop");
  EXPECT_EQ(Err("a\n{{ x|nofilter }}"), "line 2: no filter named 'nofilter'");
  // Inside an `if`, an unknown filter fails only when it runs (as in Jinja).
  EXPECT_EQ(R("{% if false %}{{ x|nofilter }}{% endif %}ok"), "ok");
  EXPECT_EQ(Err("{% if true %}{{ x|nofilter }}{% endif %}"),
            "line 1: TemplateRuntimeError: No filter named 'nofilter' found.");
  EXPECT_EQ(Err("{{ x|urlize }}"), "line 1: filter 'urlize' is not supported");
}

TEST(JinjaTest, HostileTemplatesAreBounded) {
  // Unbounded recursion.
  Result<std::string> r =
      Render("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  // Exponential fan-out hits the work limit.
  RenderLimits small;
  small.max_steps = 100000;
  r = Render(
      "{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% "
      "endmacro %}{{ f(40) }}",
      {}, small);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  // Nested loops hit the iteration cap.
  r = Render(
      "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% "
      "endfor %}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  // Doubling a string hits the size cap.
  r = Render(
      "{% set ns = namespace(s='xx') %}{% for i in range(100) %}{% set ns.s = "
      "ns.s + ns.s %}{% endfor %}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  r = Render("{{ 'x' * 10000000000 }}");
  ASSERT_FALSE(r.ok());
  // Deeply nested values.
  r = Render(
      "{% set ns = namespace(l=[]) %}{% for i in range(1000) %}{% set ns.l = "
      "[ns.l] %}{% endfor %}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  // A namespace cannot hold itself (no reference cycles).
  r = Render("{% set ns = namespace(x=1) %}{% set ns.x = [ns] %}");
  ASSERT_FALSE(r.ok());
  // Deep syntax is rejected by the parser, not the stack.
  EXPECT_FALSE(Render("{{ " + std::string(5000, '(') + "1" +
                      std::string(5000, ')') + " }}")
                   .ok());
  EXPECT_FALSE(
      Render("{{ " + std::string(5000, '[') + std::string(5000, ']') + " }}")
          .ok());
  std::string filters = "{{ 'x'";
  std::string attrs = "{{ x";
  for (int i = 0; i < 5000; ++i) {
    filters += "|trim";
    attrs += ".a";
  }
  EXPECT_FALSE(Render(filters + " }}").ok());
  EXPECT_FALSE(Render(attrs + " }}").ok());
  EXPECT_FALSE(Render("{{ " + std::string(5000, '-') + "1 }}").ok());
  std::string chain = "{{ 1";
  for (int i = 0; i < 5000; ++i) chain += " + 1";
  EXPECT_FALSE(Render(chain + " }}").ok());
  std::string nested;
  for (int i = 0; i < 5000; ++i) nested += "{% if true %}";
  EXPECT_FALSE(Render(nested).ok());
}

// Random token soup must parse or fail cleanly, and render or fail cleanly
// within the limits: no crash, no hang (seeded, so failures reproduce).
TEST(JinjaTest, RandomTemplatesFailCleanly) {
  static constexpr const char* kPieces[] = {
      "{{",
      "}}",
      "{%",
      "%}",
      "{%-",
      "-%}",
      "{#",
      "#}",
      " ",
      "\n",
      "x",
      "'s'",
      "1",
      "2.5",
      "(",
      ")",
      "[",
      "]",
      "{",
      "}",
      ",",
      ":",
      ".",
      "|",
      "~",
      "+",
      "-",
      "*",
      "/",
      "//",
      "%",
      "**",
      "==",
      "<",
      " if ",
      " else ",
      " for ",
      " in ",
      " endfor ",
      " endif ",
      " set ",
      " = ",
      " macro ",
      " endmacro ",
      " not ",
      " and ",
      " or ",
      " is ",
      " defined ",
      "loop",
      "ns",
      "namespace(a=1)",
      "range(3)",
      "messages",
      "trim",
      "tojson",
      "length",
      "items()",
      "split(',')",
      "[::-1]",
      "raise_exception('e')",
      "{% for x in range(5) %}",
      "{% endfor %}",
      "{% if x %}",
      "{% endif %}",
      "{{ x }}",
      "{% set ns.a = 2 %}",
      "{% macro m(a) %}{{ m(a) }}{% endmacro %}{{ m(1) }}",
      "{% raw %}",
      "{% endraw %}",
      "\u00e9",
      "\xff"};
  constexpr size_t kNumPieces = sizeof(kPieces) / sizeof(kPieces[0]);
  uint64_t state = 42;
  auto next = [&state] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<size_t>(state >> 33);
  };
  RenderLimits limits;
  limits.max_steps = 200000;
  limits.max_output_bytes = 1 << 20;
  Dict vars;
  vars.SetStr("messages", Value::MakeList({Value::Str("m")}));
  int rendered = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string src;
    const size_t n = 1 + next() % 24;
    for (size_t k = 0; k < n; ++k) src += kPieces[next() % kNumPieces];
    Result<std::string> r = Render(src, vars, limits);
    rendered += r.ok();
    if (!r.ok()) {
      EXPECT_FALSE(r.status().message().empty()) << src;
    }
  }
  EXPECT_GT(rendered, 100);
}

}  // namespace
}  // namespace redline::model::chat::jinja
