// mrc-gen: a testpmd-style load generator that pushes verified MRC traffic
// over several ports (planes) at once and tells what happened.
//
//   mrc-gen [EAL args] -- --role server|client [--port DEV]... [options]
//
// The two ends agree on QPs, PSNs, addresses and keys over a TCP
// connection (--oob, as perftest does), then the client writes and the
// server checks. docs/mrc-gen.md lists every flag.
//
// Exit status: 0 the run completed (and verified, with --verify), 1 the run
// failed (QP errors, verify errors, a peer that went away), 2 bad usage or
// a set-up failure.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "app_dpdk.h"
#include "generator.h"

using namespace mrc;

namespace {

int run_main(app::Args &args) {
    gen::Options o;
    CLI::App cli{"mrc-gen: MRC load generator (EAL arguments, then --, then these)"};
    gen::add_options(cli, o);
    if (auto rc = app::parse_cli(cli, args)) return *rc;
    if (auto r = gen::check_options(o); !r) {
        std::fprintf(stderr, "mrc-gen: %s\n", r.error().message.c_str());
        return app::kExitUsage;
    }
    gen::Generator g(o);
    g.run();
    return g.finish();
}

}  // namespace

int main(int argc, char **argv) {
    return app::dpdk_main("mrc-gen", argc, argv, {}, run_main);
}
