// The rtnetlink parsers on hand-made answers (every truncation included),
// and the socket against this host's loopback.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <linux/neighbour.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>

#include <cstring>

#include "kernel/netlink.h"

namespace mrc::kernel {
namespace {

// One netlink message: header, fixed body, attributes.
class Msg {
  public:
    template <class Body>
    Msg(uint16_t type, const Body &body) {
        bytes_.resize(NLMSG_LENGTH(0));
        nlmsghdr h{};
        h.nlmsg_type = type;
        std::memcpy(bytes_.data(), &h, sizeof h);
        append(&body, sizeof body);
        pad();
    }
    Msg &attr(uint16_t type, const void *data, size_t len) {
        rtattr a{};
        a.rta_len = static_cast<uint16_t>(RTA_LENGTH(len));
        a.rta_type = type;
        append(&a, sizeof a);
        append(data, len);
        pad();
        return *this;
    }
    Msg &ipv4(uint16_t type, uint32_t ip) {
        const uint32_t be = htonl(ip);
        return attr(type, &be, 4);
    }
    std::vector<uint8_t> done() const {
        std::vector<uint8_t> b = bytes_;
        const auto len = static_cast<uint32_t>(b.size());
        std::memcpy(b.data(), &len, 4);
        return b;
    }

  private:
    void append(const void *p, size_t n) {
        const auto *c = static_cast<const uint8_t *>(p);
        bytes_.insert(bytes_.end(), c, c + n);
    }
    void pad() { bytes_.resize(NLMSG_ALIGN(bytes_.size())); }
    std::vector<uint8_t> bytes_;
};

std::vector<uint8_t> error_msg(int negative_errno) {
    nlmsgerr e{};
    e.error = negative_errno;
    return Msg(NLMSG_ERROR, e).done();
}

std::vector<uint8_t> route_msg(uint8_t type, uint32_t gw, int oif) {
    rtmsg rt{};
    rt.rtm_family = AF_INET;
    rt.rtm_type = type;
    Msg m(RTM_NEWROUTE, rt);
    m.ipv4(RTA_DST, 0x0a020002);
    if (gw) m.ipv4(RTA_GATEWAY, gw);
    m.attr(RTA_OIF, &oif, 4);
    m.ipv4(RTA_PREFSRC, 0x0a010001);
    return m.done();
}

std::vector<uint8_t> neigh_msg(uint16_t state, const uint8_t *mac) {
    ndmsg nd{};
    nd.ndm_family = AF_INET;
    nd.ndm_state = state;
    Msg m(RTM_NEWNEIGH, nd);
    m.ipv4(NDA_DST, 0x0a0100fe);
    if (mac) m.attr(NDA_LLADDR, mac, 6);
    return m.done();
}

const uint8_t kMac[6] = {0x02, 0x11, 0x22, 0x33, 0x44, 0x55};

TEST(KernelParse, RouteWithGateway) {
    const auto r = parse_route(route_msg(RTN_UNICAST, 0x0a0100fe, 7));
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->gateway, 0x0a0100feu);
    EXPECT_EQ(r->oif, 7);
    EXPECT_EQ(r->prefsrc, 0x0a010001u);
}

TEST(KernelParse, OnLinkRouteHasNoGateway) {
    const auto r = parse_route(route_msg(RTN_UNICAST, 0, 3));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->gateway, 0u);
}

TEST(KernelParse, LocalUnreachableAndErrorsAreErrors) {
    EXPECT_FALSE(parse_route(route_msg(RTN_LOCAL, 0, 1)));
    EXPECT_FALSE(parse_route(route_msg(RTN_UNREACHABLE, 0, 1)));
    const auto e = parse_route(error_msg(-ENETUNREACH));
    ASSERT_FALSE(e);
    EXPECT_NE(e.error().message.find("unreachable"), std::string::npos) << e.error().message;
    EXPECT_FALSE(parse_route({}));
}

TEST(KernelParse, NeighborUsableStatesGiveTheMac) {
    for (uint16_t s : {NUD_REACHABLE, NUD_STALE, NUD_DELAY, NUD_PROBE, NUD_PERMANENT}) {
        const auto n = parse_neighbor(neigh_msg(s, kMac));
        ASSERT_TRUE(n);
        ASSERT_TRUE(n->mac) << neighbor_state_name(s);
        EXPECT_EQ(std::memcmp(n->mac->b, kMac, 6), 0);
    }
    for (uint16_t s : {NUD_INCOMPLETE, NUD_FAILED, NUD_NONE}) {
        const auto n = parse_neighbor(neigh_msg(s, kMac));
        ASSERT_TRUE(n);
        EXPECT_FALSE(n->mac) << neighbor_state_name(s);
        EXPECT_EQ(n->state, s);
    }
    // Reachable without an address (or a zero one) is not usable.
    EXPECT_FALSE(parse_neighbor(neigh_msg(NUD_REACHABLE, nullptr))->mac);
    const uint8_t zero[6] = {};
    EXPECT_FALSE(parse_neighbor(neigh_msg(NUD_REACHABLE, zero))->mac);
}

TEST(KernelParse, NoNeighborIsNotAnError) {
    const auto n = parse_neighbor(error_msg(-ENOENT));
    ASSERT_TRUE(n);
    EXPECT_EQ(n->state, 0);
    EXPECT_FALSE(n->mac);
    EXPECT_FALSE(parse_neighbor(error_msg(-EPERM)));
}

TEST(KernelParse, AddressesOfOneInterface) {
    std::vector<uint8_t> dump;
    for (const auto &[index, ip, len] :
         {std::tuple{2, 0x0a010001u, 24}, std::tuple{3, 0x0a030001u, 16},
          std::tuple{2, 0xc0a80001u, 30}}) {
        ifaddrmsg ia{};
        ia.ifa_family = AF_INET;
        ia.ifa_index = static_cast<uint32_t>(index);
        ia.ifa_prefixlen = static_cast<uint8_t>(len);
        const auto m = Msg(RTM_NEWADDR, ia).ipv4(IFA_ADDRESS, ip).ipv4(IFA_LOCAL, ip).done();
        dump.insert(dump.end(), m.begin(), m.end());
    }
    const auto done = Msg(NLMSG_DONE, int{0}).done();
    dump.insert(dump.end(), done.begin(), done.end());
    const auto a = parse_addresses(dump, 2);
    ASSERT_TRUE(a);
    ASSERT_EQ(a->size(), 2u);
    EXPECT_EQ((*a)[0].ip, 0x0a010001u);
    EXPECT_EQ((*a)[0].prefix_len, 24);
    EXPECT_TRUE((*a)[0].contains(0x0a0100fe));
    EXPECT_FALSE((*a)[0].contains(0x0a0200fe));
    EXPECT_TRUE((*a)[1].contains(0xc0a80002));
    EXPECT_FALSE((*a)[1].contains(0xc0a80004));
}

// Every truncation of every answer: an error or a value, never a read
// past the end (ASan build) and never a usable MAC from half an answer.
TEST(KernelParse, EveryTruncationIsSafe) {
    const std::vector<std::vector<uint8_t>> answers = {
        route_msg(RTN_UNICAST, 0x0a0100fe, 7), neigh_msg(NUD_REACHABLE, kMac), error_msg(-ENOENT)};
    for (const auto &full : answers)
        for (size_t n = 0; n < full.size(); ++n) {
            const std::vector<uint8_t> cut(full.begin(), full.begin() + n);
            (void)parse_route(cut);
            (void)parse_addresses(cut, 1);
            const auto nb = parse_neighbor(cut);
            if (nb && nb->mac) {
                EXPECT_EQ(std::memcmp(nb->mac->b, kMac, 6), 0);
            }
        }
    // A length field that claims more than there is.
    auto bad = route_msg(RTN_UNICAST, 0x0a0100fe, 7);
    const uint32_t huge = 1u << 20;
    std::memcpy(bad.data(), &huge, 4);
    EXPECT_FALSE(parse_route(bad));
}

// The real socket, on this host's loopback.
TEST(KernelNetlink, LoopbackAnswers) {
    auto nl = Netlink::open();
    ASSERT_TRUE(nl) << nl.error().message;
    const int lo = ifindex("lo");
    ASSERT_GT(lo, 0);
    const auto addrs = nl->addresses(lo);
    ASSERT_TRUE(addrs) << addrs.error().message;
    bool has_localhost = false;
    for (const IfAddr &a : *addrs)
        has_localhost = has_localhost || (a.ip == 0x7f000001 && a.prefix_len == 8);
    EXPECT_TRUE(has_localhost);
    // 127.0.0.2 is this host's own (a local route): refused, with a reason.
    const auto r = nl->route_to(0x7f000002, 0, lo);
    ASSERT_FALSE(r);
    EXPECT_FALSE(r.error().message.empty());
    // An address nobody has: no route through lo.
    EXPECT_FALSE(nl->route_to(0x0a636363, 0, lo));
    // No neighbour entry on lo for it: no MAC, no error.
    const auto n = nl->neighbor(lo, 0x0a636363);
    ASSERT_TRUE(n) << n.error().message;
    EXPECT_FALSE(n->mac);
    EXPECT_EQ(ifindex("no-such-interface0"), 0);
}

}  // namespace
}  // namespace mrc::kernel
