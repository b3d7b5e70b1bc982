// The benchmarks' main(): Google Benchmark's, except that a benchmark which
// failed its own verification (state.SkipWithError) fails the run. Without
// this the program exits 0 and the smoke tests in the suite pass on a
// benchmark that measured nothing.
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

template <class Base>
class FailureCounting final : public Base {
  public:
    using Base::Base;
    void ReportRuns(const std::vector<benchmark::BenchmarkReporter::Run> &runs) override {
        for (const auto &r : runs) {
            if (!r.error_occurred) continue;
            ++failed_;
            std::fprintf(stderr, "benchmark %s failed: %s\n", r.benchmark_name().c_str(),
                         r.error_message.c_str());
        }
        Base::ReportRuns(runs);
    }
    size_t failed() const { return failed_; }

  private:
    size_t failed_ = 0;
};

template <class Base, class... Args>
int run(Args... args) {
    FailureCounting<Base> reporter(args...);
    benchmark::RunSpecifiedBenchmarks(&reporter);
    benchmark::Shutdown();
    if (reporter.failed() == 0) return 0;
    std::fprintf(stderr, "%zu benchmark run(s) failed their verification\n", reporter.failed());
    return 1;
}

}  // namespace

int main(int argc, char **argv) {
    // The display format is chosen here: a reporter passed in replaces the
    // one --benchmark_format would have made.
    std::string format = "console";
    for (int i = 1; i < argc; ++i)
        if (std::strncmp(argv[i], "--benchmark_format=", 19) == 0) format = argv[i] + 19;
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    if (format == "json") return run<benchmark::JSONReporter>();
    if (format == "console") {
        // Colours only on a terminal, as Google Benchmark's own main() does.
        auto opts = benchmark::ConsoleReporter::OO_Tabular;
        if (::isatty(::fileno(stdout)))
            opts = benchmark::ConsoleReporter::OutputOptions(opts |
                                                             benchmark::ConsoleReporter::OO_Color);
        return run<benchmark::ConsoleReporter>(opts);
    }
    std::fprintf(stderr, "--benchmark_format=%s: this main() knows console and json\n",
                 format.c_str());
    return 2;
}
