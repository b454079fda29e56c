// The render budget against hostile templates: each shape below once ran
// for minutes or allocated gigabytes on 16 MB inputs. Every one must now
// fail with ResourceExhausted quickly, with bounded memory, while ordinary
// templates render as before.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/json/object.hpp>
#include <chrono>
#include <cstdio>
#include <limits>
#include <string>
#include <thread>

#include "base/sanitizers.h"
#include "model/chat/chat_template.h"
#include "model/chat/jinja_interpreter.h"

namespace redline::model::chat::jinja {
namespace {

// Sanitizers slow the code down several times and keep freed memory in
// quarantine, so their builds get more time and skip the RSS bound.
// Otherwise generous: the machines running the tests are shared and may be
// slow.
constexpr double kMaxSeconds = kSanitized ? 10.0 : 1.0;
constexpr bool kCheckRss = !kSanitized;
constexpr size_t kBig = size_t{16} << 20;
constexpr int64_t kMaxRssGrowthBytes = int64_t{200} << 20;

// Field 0 (virtual size) or 1 (resident set) of /proc/self/statm, in bytes.
int64_t StatmBytes(int field) {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  long pages[2] = {0, 0};
  const int n = std::fscanf(f, "%ld %ld", &pages[0], &pages[1]);
  std::fclose(f);
  return n == 2 ? static_cast<int64_t>(pages[field]) * sysconf(_SC_PAGESIZE)
                : 0;
}

int64_t ResidentBytes() { return StatmBytes(1); }

struct Measured {
  Result<std::string> result = Status::Internal("not run");
  double seconds = 0;
  int64_t rss_growth_bytes = 0;
};

// Renders while a second thread samples the resident set, so that memory
// allocated and freed during the render still counts.
Measured RenderMeasured(std::string_view source, const Dict& vars,
                        const RenderBudget& budget = {},
                        const RenderLimits& limits = {}) {
  Measured m;
  auto parsed = Template::Parse(source);
  if (!parsed.ok()) {
    m.result = parsed.status();
    return m;
  }
  RenderOptions options;
  options.budget = budget;
  options.limits = limits;
  const int64_t before = ResidentBytes();
  std::atomic<bool> done{false};
  std::atomic<int64_t> peak{before};
  std::thread sampler([&] {
    while (!done.load()) {
      peak.store(std::max(peak.load(), ResidentBytes()));
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
  });
  const auto start = std::chrono::steady_clock::now();
  m.result = (*parsed)->Render(vars, options);
  m.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  done.store(true);
  sampler.join();
  m.rss_growth_bytes = std::max(peak.load(), ResidentBytes()) - before;
  return m;
}

class BudgetTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    vars_ = new Dict();
    // Two equal strings that are different objects (comparing them reads
    // every byte), and one that is all line breaks.
    vars_->SetStr("s", Value::Str(std::string(kBig, 'x')));
    vars_->SetStr("t", Value::Str(std::string(kBig, 'x')));
    vars_->SetStr("nl", Value::Str(std::string(kBig, '\n')));
    vars_->SetStr("a", Value::Str(std::string(kBig, 'a')));
  }
  static void TearDownTestSuite() {
    delete vars_;
    vars_ = nullptr;
  }

  // The render of `source` fails with ResourceExhausted, fast and within
  // the memory bound; returns the message.
  static std::string ExpectExhausted(std::string_view source,
                                     const RenderBudget& budget = {}) {
    Measured m = RenderMeasured(source, *vars_, budget);
    EXPECT_FALSE(m.result.ok()) << source;
    if (m.result.ok()) return "";
    EXPECT_EQ(m.result.status().code(), StatusCode::kResourceExhausted)
        << source << ": " << m.result.status().message();
    EXPECT_LT(m.seconds, kMaxSeconds) << source;
    if (kCheckRss) {
      EXPECT_LT(m.rss_growth_bytes, kMaxRssGrowthBytes) << source;
    }
    return m.result.status().message();
  }

  static Dict* vars_;
};

Dict* BudgetTest::vars_ = nullptr;

// A loop around an operation that reads all 16 MB each time.
std::string Loop(std::string_view body) {
  return "{% for i in range(100000) %}" + std::string(body) + "{% endfor %}";
}

TEST_F(BudgetTest, ComparisonsOfLongStringsInALoop) {
  ExpectExhausted(Loop("{% if s == t %}{% endif %}"));
  ExpectExhausted(Loop("{% if s != t %}{% endif %}"));
  ExpectExhausted(Loop("{% if s < t %}{% endif %}"));
  ExpectExhausted(Loop("{% if [s] == [t] %}{% endif %}"));
  ExpectExhausted(Loop("{% if s is eq t %}{% endif %}"));
}

TEST_F(BudgetTest, SearchesOfLongStringsInALoop) {
  ExpectExhausted(Loop("{% if 'y' in s %}{% endif %}"));
  ExpectExhausted(Loop("{% set n = s.count('y') %}"));
  ExpectExhausted(Loop("{% set n = s.find('y') %}"));
  ExpectExhausted(Loop("{% set n = s.rfind('y' * 100) %}"));
  ExpectExhausted(Loop("{% if s.startswith(t) %}{% endif %}"));
  ExpectExhausted(Loop("{% if s.endswith('x', 1) %}{% endif %}"));
  ExpectExhausted(Loop("{% set d = {'k': 1} %}{% if s in d %}{% endif %}"));
  ExpectExhausted(Loop("{% set x = s[5] %}"));
}

TEST_F(BudgetTest, StringFiltersOnLongStringsInALoop) {
  ExpectExhausted(Loop("{% set x = s.strip() %}"));
  ExpectExhausted(Loop("{% set x = s|trim %}"));
  ExpectExhausted(Loop("{% set n = s|length %}"));
  ExpectExhausted(Loop("{% set x = s|truncate(10) %}"));
  ExpectExhausted(Loop("{% set x = s|upper %}"));
  ExpectExhausted(Loop("{% set x = s[1:] %}"));
  ExpectExhausted(Loop("{% set x = s|wordcount %}"));
}

TEST_F(BudgetTest, SplittingALongStringIntoPiecesIsRefused) {
  // One value per character or line: gigabytes.
  EXPECT_NE(ExpectExhausted("{{ s|list|length }}").find("memory budget"),
            std::string::npos);
  ExpectExhausted("{{ nl.splitlines()|length }}");
  ExpectExhausted("{{ s|unique|list|length }}");
  ExpectExhausted("{{ nl.split('\\n')|length }}");
  ExpectExhausted("{{ nl.rsplit('\\n')|length }}");
  ExpectExhausted("{% for c in s %}{% endfor %}");
  ExpectExhausted("{{ s|batch(1)|list|length }}");
}

TEST_F(BudgetTest, OversizedResultsAreRefusedBeforeTheyAreBuilt) {
  ExpectExhausted("{{ nl|indent(4) }}");
  ExpectExhausted("{{ nl|indent('y' * 1000) }}");
  ExpectExhausted("{{ nl|indent(1000, blank=true) }}");
  ExpectExhausted("{{ 'y' * 100000000 }}");
  ExpectExhausted("{{ [s] * 100000000 }}");
  ExpectExhausted("{{ ([s] * 100)|join }}");
  ExpectExhausted("{{ (['y'] * 100000)|join(s) }}");
  ExpectExhausted("{{ 'x'|center(100000000) }}");
  ExpectExhausted("{{ 'x'.ljust(9000000000000000000) }}");
  ExpectExhausted("{{ s.replace('x', 'yy') }}");
  ExpectExhausted("{{ s|replace('', 'ab') }}");
  ExpectExhausted("{{ s ~ s }}");
  ExpectExhausted("{{ s + s }}");
  ExpectExhausted("{{ [1]|batch(1000000000000, 0)|list }}");
  ExpectExhausted("{{ [1]|slice(1000000000000)|list }}");
  ExpectExhausted("{{ ('\\x01' * 10000000)|tojson }}");
  ExpectExhausted("{{ {'a': {'b': 1}}|tojson(indent=100000000) }}");
}

TEST_F(BudgetTest, ValuesThatPrintAsTerabytesAreRefused) {
  // Shared references make a small list print (or serialise) enormous.
  ExpectExhausted("{{ [s] * 1000 }}");
  ExpectExhausted("{{ ([s] * 1000)|tojson }}");
  ExpectExhausted("{{ ([s] * 1000)|string|length }}");
  ExpectExhausted("{{ ([s] * 1000)|pprint|length }}");
  ExpectExhausted("{{ '%s'|format([s] * 1000) }}");
  ExpectExhausted("{{ '{}'.format([s] * 1000) }}");
  ExpectExhausted("{{ ([s] * 1000)|sort|length }}");
  // An error message quotes such a value only in part.
  Measured m =
      RenderMeasured("{{ s[[s] * 1000] }}|{{ {}[[s] * 1000] }}|", *vars_);
  ASSERT_TRUE(m.result.ok()) << m.result.status().message();
  EXPECT_EQ(*m.result, "||");
  EXPECT_LT(m.seconds, kMaxSeconds);
  m = RenderMeasured("{{ ([s] * 1000).index(1) }}", *vars_);
  ASSERT_FALSE(m.result.ok());
  EXPECT_LT(m.result.status().message().size(), 1000u);
  EXPECT_LT(m.seconds, kMaxSeconds);
}

TEST_F(BudgetTest, FormatWidthsBeyondTheOutputLimitAreErrors) {
  // Once clamped to 4,096 bytes without a word; now refused.
  Measured m = RenderMeasured("{{ '%099999999d'|format(1) }}", *vars_);
  ASSERT_FALSE(m.result.ok());
  EXPECT_EQ(m.result.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(m.result.status().message().find("output size limit"),
            std::string::npos)
      << m.result.status().message();
  ExpectExhausted("{{ '%.99999999f'|format(1.5) }}");
  ExpectExhausted("{{ '%*d'|format(99999999, 1) }}");
  ExpectExhausted("{{ '%-99999999s'|format('x') }}");
  ExpectExhausted("{{ '{:>99999999}'.format('x') }}");
  ExpectExhausted("{{ '{:.99999999f}'.format(1.5) }}");
  // Widths and precisions under the limit render in full, as in Python.
  m = RenderMeasured("{{ '%05000d'|format(7) }}", *vars_);
  ASSERT_TRUE(m.result.ok()) << m.result.status().message();
  EXPECT_EQ(*m.result, std::string(4999, '0') + "7");
  m = RenderMeasured("{{ '%.600d'|format(-7) }}|{{ '{:*^9}'.format('ab') }}",
                     *vars_);
  ASSERT_TRUE(m.result.ok()) << m.result.status().message();
  EXPECT_EQ(*m.result, "-" + std::string(599, '0') + "7|***ab****");
  m = RenderMeasured("{{ '%.150f'|format(0.5) }}", *vars_);
  ASSERT_TRUE(m.result.ok()) << m.result.status().message();
  EXPECT_EQ(*m.result, "0.5" + std::string(149, '0'));
}

TEST_F(BudgetTest, QuadraticSearchesRunInLinearTime) {
  // std::string::find would compare 1 MB at each of a million positions
  // (hours); without a deadline, this checks the algorithms themselves.
  RenderBudget no_deadline;
  no_deadline.max_time_ms = 0;
  Measured m = RenderMeasured(
      "{% set h = 'a' * 2000000 %}{% set n = 'a' * 1000000 ~ 'b' %}"
      "{% set rn = 'b' ~ 'a' * 1000000 %}"
      "{{ n in h }}|{{ h.count(n) }}|{{ h.find(n) }}|{{ h.rfind(rn) }}|"
      "{{ h.split(n)|length }}|{{ h.rsplit(rn)|length }}|"
      "{{ h.partition(n)|length }}|{{ h.replace(n, '')|length }}",
      *vars_, no_deadline);
  ASSERT_TRUE(m.result.ok()) << m.result.status().message();
  EXPECT_EQ(*m.result, "False|0|-1|-1|1|1|3|2000000");
  EXPECT_LT(m.seconds, kMaxSeconds);
}

TEST_F(BudgetTest, NestedOutputBuffersCountTowardMemory) {
  // Each macro level holds 15 MB of output while it calls the next.
  ExpectExhausted(
      "{% macro f(n) %}{{ 'y' * 15000000 }}{% if n > 0 %}{{ f(n - 1) }}"
      "{% endif %}{% endmacro %}{{ f(60)|length }}");
  ExpectExhausted(
      "{% set ns = namespace(l=[]) %}{% for i in range(100) %}"
      "{% set ns.l = ns.l + ['y' * 1000000 ~ i] %}{% endfor %}");
}

TEST_F(BudgetTest, MemoryIsReleasedWhenValuesDie) {
  // 120 MB made over the render, never more than 8 MB alive at once (no
  // deadline: a slow machine must not make this flaky).
  RenderBudget no_deadline;
  no_deadline.max_time_ms = 0;
  Measured m = RenderMeasured(
      "{% for i in range(30) %}{% set x = 'y' * 4000000 %}{% endfor %}ok",
      *vars_, no_deadline);
  ASSERT_TRUE(m.result.ok()) << m.result.status().message();
  EXPECT_EQ(*m.result, "ok");
}

TEST_F(BudgetTest, EachBudgetIsNamedInItsError) {
  RenderBudget work;
  work.max_work_units = 100000;
  EXPECT_EQ(
      ExpectExhausted("{% for i in range(100000) %}{{ i }}{% endfor %}", work),
      "line 1: chat template exceeded its work budget (100000 units)");
  RenderBudget memory;
  memory.max_memory_bytes = size_t{1} << 20;
  EXPECT_EQ(ExpectExhausted("{{ 'y' * 2000000 }}", memory),
            "line 1: chat template exceeded its memory budget of 1 MiB");
  RenderBudget time;
  time.max_time_ms = 5;
  time.max_work_units = int64_t{1} << 40;
  RenderLimits unbounded;
  unbounded.max_steps = int64_t{1} << 40;
  unbounded.max_loop_iterations = int64_t{1} << 40;
  Measured m = RenderMeasured(
      "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}"
      "{% endfor %}",
      *vars_, time, unbounded);
  ASSERT_FALSE(m.result.ok());
  EXPECT_EQ(m.result.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(m.result.status().message(),
            "line 1: chat template exceeded its time budget of 5 ms");
  EXPECT_LT(m.seconds, kMaxSeconds);
}

TEST_F(BudgetTest, OrdinaryTemplatesRenderAsBefore) {
  // Only the work and memory budgets: the 100 ms deadline is about
  // hostile templates, and a loaded CI machine can take longer than that
  // to copy a 16 MiB slice.
  RenderBudget budget;
  budget.max_time_ms = 0;
  Measured m = RenderMeasured(
      "{% set ns = namespace(n=0) %}{% for m in ['a', 'b '] %}"
      "{% set ns.n = ns.n + m|trim|length %}{{ m|upper }}{% endfor %}"
      "{{ ns.n }}{{ s|length }}{{ s[:3] }}{{ s[-2:] }}{{ 'x' in s }}",
      *vars_, budget);
  ASSERT_TRUE(m.result.ok()) << m.result.status().message();
  EXPECT_EQ(*m.result, "AB 2" + std::to_string(kBig) + "xxxxxTrue");
}

TEST(MeterTest, ValuesHoldTheirBytesUntilDestroyed) {
  Meter meter{RenderBudget{}};
  {
    MeterScope scope(&meter);
    Value s = Value::Str(std::string(1000, 'x'));
    const size_t string_bytes = meter.held_bytes();
    EXPECT_GE(string_bytes, 1000u);
    EXPECT_LE(string_bytes, StringValueBytes(1000));
    Value list = Value::MakeList({s, s, s});
    Dict d;
    d.SetStr("k", list);
    Value dict = Value::MakeDict(std::move(d));
    EXPECT_GT(meter.held_bytes(), string_bytes + 3 * sizeof(Value));
    s = Value();
    list = Value();
    // The dict still holds the list, which holds the string.
    EXPECT_GT(meter.held_bytes(), string_bytes);
  }
  EXPECT_EQ(meter.held_bytes(), 0u);
  // Values made outside a render are not accounted.
  Value outside = Value::Str(std::string(1000, 'y'));
  EXPECT_EQ(meter.held_bytes(), 0u);
}

TEST(MeterTest, ExhaustionIsSticky) {
  RenderBudget budget;
  budget.max_work_units = 10;
  budget.max_memory_bytes = 100;
  Meter meter(budget);
  EXPECT_TRUE(meter.Spend(10));
  EXPECT_TRUE(meter.Reserve(100));
  EXPECT_FALSE(meter.Spend(1));
  EXPECT_TRUE(meter.exhausted());
  EXPECT_EQ(meter.status().message(),
            "chat template exceeded its work budget (10 units)");
  EXPECT_FALSE(meter.Spend(0));
  EXPECT_FALSE(meter.Reserve(0));
  EXPECT_FALSE(meter.CheckTime());

  Meter memory(budget);
  memory.Hold(60);
  EXPECT_FALSE(memory.Reserve(41));
  EXPECT_EQ(memory.status().message(),
            "chat template exceeded its memory budget of 100 bytes");
  Meter held(budget);
  held.Hold(101);
  EXPECT_FALSE(held.Reserve(0));

  budget.max_time_ms = 1;
  Meter time(budget);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_FALSE(time.CheckTime());
  EXPECT_EQ(time.status().message(),
            "chat template exceeded its time budget of 1 ms");
  budget.max_time_ms = 0;
  Meter no_deadline(budget);
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_TRUE(no_deadline.CheckTime());
}

// Helpers rewritten to stream instead of decoding whole strings (strip,
// split, splitlines, slicing, indent, truncate, format, tojson) give what
// Jinja2 3.1 gives; the expected text is Python's rendering.
TEST(BudgetRewriteTest, MatchesJinja) {
  auto t = Template::Parse(
      R"J({{ '  a b  c  '.split(None, 1) }}|{{ '  a b c'.rsplit(None, 1) }}|{{ 'aaa'.rsplit('aa') }}|{{ 'aaa'.split('aa') }}|{{ 'aaa'.rsplit('aa', 1) }}
{{ 'a\r\nb\u0085c\u2028d\n\ne'.splitlines() }}|{{ 'xxhixx'.strip('x') }}|{{ '\u00e9a\u00e9'.strip('\u00e9') }}|[{{ ' \u3000\u00e9 \t'.strip() }}]|{{ 'h\u00e9llo'.lstrip('h') }}|{{ 'h\u00e9llo'.rstrip('ol') }}
{{ 'h\u00e9llo world'|truncate(9, true, '', 0) }}|{{ 'h\u00e9llo world foo'|truncate(12) }}|{{ 'a-b c(d'|title }}|{{ 'h\u00e9llo'[1] }}|{{ 'h\u00e9llo'[-1] }}|{{ 'h\u00e9llo'[::-1] }}|{{ 'h\u00e9llo'[1:3] }}|{{ 'h\u00e9llo'[::2] }}|{{ 'h\u00e9llo'[-2::-2] }}
{{ 'ab\ncd'|indent(2, true) }}|{{ '\n\nx'|indent(2) }}|{{ 'a\n\nb'|indent('>', blank=true) }}|{{ 'aXbXc'.rpartition('X') }}|{{ 'abcabc'.rfind('bc') }}|{{ 'a\tb\n\tc'.expandtabs(4) }}
{{ '%5s|%-5s|%05.1f|%+d|%x|%o|%.3s'|format('a', 'b', 3.14159, 5, -255, 8, 'h\u00e9llo') }}|{{ 'x' * 3 }}|{{ 'ab' * 0 }}|{{ [1, 2, 3, 4, 5]|batch(2, 0)|list }}|{{ [1, 2, 3]|slice(2)|list }}|{{ [1, 2, 3]|slice(4, 'f')|list }}
{{ 'abc'|first }}{{ 'abc'|last }}{{ '\u00e9\u00e8'|first }}{{ '\u00e9\u00e8'|last }}|{{ 'abc'.replace('', '-') }}|{{ 'a\u00e9b'.replace('', '.', 2) }}|{{ 'abcb'.count('b') }}|{{ 'h\u00e9llo'.find('l') }}|{{ 'h\u00e9llo'.rfind('l') }}|{{ 'h\u00e9llo'.index('o', 2) }}
{{ 'Hello World'|wordcount }}|{{ 'caf\u00e9'|upper }}|{{ 'ABC\u00c9'|lower }}|{{ 'hELLO wORLD'.capitalize() }}|{{ 'Hi'.swapcase() }}|{{ '{:*^9}|{:>6.2f}|{!r}'.format('ab', 3.14159, 'q') }}|{{ 'ab'.center(6, '*') }}|{{ 'x'|center(4) }}
{{ {'b': 1, 'a': [1, 'x']}|tojson(indent=2) }}|{{ '\u00e9\n\u0001'|tojson }}|{{ '\u00e9\U0001F600'|tojson(ensure_ascii=true) }}|{{ [1, [2, ['x']]] }}|{{ ('a',) }}|{{ ['it\'s', "q\"", '\x01\u00e9'] }}
{{ 'x' in 'axb' }}|{{ [1, 2] == [1, 2] }}|{{ [1, [2]] < [1, [3]] }}|{{ 'b' > 'a' }}|{{ ['b', 'A', 'c']|sort }}|{{ ['b', 'a', 'B']|unique|list }}|{{ 'ab'|list }}|{{ {'k': 1}|dictsort }}|{{ 'abc'|reverse }}
)J");
  ASSERT_TRUE(t.ok()) << t.status().message();
  Result<std::string> r = (*t)->Render(Dict(), RenderOptions());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(*r, R"J(['a', 'b  c  ']|['  a b', 'c']|['a', '']|['', 'a']|['a', '']
['a', 'b', 'c', 'd', '', 'e']|hi|a|[é]|éllo|hé
héllo wor|héllo world foo|A-B C(D|é|o|olléh|él|hlo|lé
  ab
  cd|

  x|a
>
>b|('aXb', 'X', 'c')|4|a   b
    c
    a|b    |003.1|+5|-ff|10|hél|xxx||[[1, 2], [3, 4], [5, 0]]|[[1, 2], [3]]|[[1], [2], [3], ['f']]
acéè|-a-b-c-|.a.éb|2|2|3|4
2|CAFÉ|abcé|Hello world|hI|***ab****|  3.14|'q'|**ab**| x  
{
  "b": 1,
  "a": [
    1,
    "x"
  ]
}|"é\n\u0001"|"\u00e9\ud83d\ude00"|[1, [2, ['x']]]|('a',)|["it's", 'q"', '\x01é']
True|True|True|True|['A', 'b', 'c']|['b', 'a']|['a', 'b']|[('k', 1)]|cba)J");
}

// Should a size check ever be missed, the allocation failure is still an
// error, not an abort. With every budget lifted and the address space
// limited (in a child process), an 8 GiB string cannot be allocated.
TEST(AllocationFailureTest, BecomesResourceExhausted) {
#ifdef RL_JINJA_SANITIZED
  GTEST_SKIP() << "sanitizers reserve the address space RLIMIT_AS limits";
#endif
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        rlimit limit{};
        getrlimit(RLIMIT_AS, &limit);
        limit.rlim_cur =
            static_cast<rlim_t>(StatmBytes(0) + (int64_t{2} << 30));
        setrlimit(RLIMIT_AS, &limit);
        RenderOptions options;
        options.budget.max_work_units = std::numeric_limits<int64_t>::max();
        options.budget.max_memory_bytes = std::numeric_limits<size_t>::max();
        options.budget.max_time_ms = 0;
        options.limits.max_output_bytes = std::numeric_limits<size_t>::max();
        auto t = Template::Parse("{{ 'x' * 8589934592 }}");
        Result<std::string> r = (*t)->Render(Dict(), options);
        const bool ok =
            !r.ok() && r.status().code() == StatusCode::kResourceExhausted &&
            r.status().message() == "chat template ran out of memory";
        std::_Exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

// The budget reaches the interpreter through the public API, and a real
// template handles a long (4 MB) message within the defaults.
TEST(ChatTemplateBudgetTest, PassesThroughInputs) {
  auto source = BuiltinChatTemplate("chatml");
  ASSERT_TRUE(source.ok());
  auto t = ChatTemplate::Parse(*source);
  ASSERT_TRUE(t.ok());
  ChatTemplateInputs in;
  boost::json::object message;
  message["role"] = "user";
  message["content"] = std::string(size_t{4} << 20, 'z');
  in.messages.push_back(message);
  const auto start = std::chrono::steady_clock::now();
  Result<std::string> out = t->Render(in);
  EXPECT_LT(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count(),
      kMaxSeconds);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_GT(out->size(), size_t{4} << 20);
  in.budget.max_memory_bytes = size_t{1} << 20;
  out = t->Render(in);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(out.status().message().find("memory budget of 1 MiB"),
            std::string::npos)
      << out.status().message();
}

}  // namespace
}  // namespace redline::model::chat::jinja
