#include "kernel/netlink.h"

#include <arpa/inet.h>
#include <linux/neighbour.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>

namespace mrc::kernel {
namespace {

// ---- reading messages and attributes, bounds checked ----------------------------

// Calls `fn(type, body)` for every message of `buf`; stops (false) at a
// message that does not fit.
bool for_each_message(std::span<const uint8_t> buf,
                      const std::function<bool(uint16_t, std::span<const uint8_t>)> &fn) {
    size_t at = 0;
    while (buf.size() - at >= sizeof(nlmsghdr)) {
        nlmsghdr h;
        std::memcpy(&h, buf.data() + at, sizeof h);
        if (h.nlmsg_len < sizeof(nlmsghdr) || h.nlmsg_len > buf.size() - at) return false;
        if (!fn(h.nlmsg_type, buf.subspan(at + sizeof(nlmsghdr), h.nlmsg_len - sizeof(nlmsghdr))))
            return true;
        at += NLMSG_ALIGN(h.nlmsg_len);
        if (at > buf.size()) break;
    }
    return true;
}

// Calls `fn(type, payload)` for every attribute of `attrs`.
void for_each_attr(std::span<const uint8_t> attrs,
                   const std::function<void(uint16_t, std::span<const uint8_t>)> &fn) {
    size_t at = 0;
    while (attrs.size() - at >= sizeof(rtattr)) {
        rtattr a;
        std::memcpy(&a, attrs.data() + at, sizeof a);
        if (a.rta_len < sizeof(rtattr) || a.rta_len > attrs.size() - at) return;
        fn(a.rta_type & NLA_TYPE_MASK,
           attrs.subspan(at + RTA_LENGTH(0), a.rta_len - RTA_LENGTH(0)));
        at += RTA_ALIGN(a.rta_len);
        if (at > attrs.size()) return;
    }
}

std::optional<uint32_t> ipv4_attr(std::span<const uint8_t> v) {
    if (v.size() != 4) return std::nullopt;
    uint32_t be;
    std::memcpy(&be, v.data(), 4);
    return ntohl(be);
}

// An NLMSG_ERROR body: 0 (an acknowledgement) or the negative errno.
int error_code(std::span<const uint8_t> body) {
    if (body.size() < sizeof(int)) return -EPROTO;
    int e;
    std::memcpy(&e, body.data(), sizeof e);
    return e;
}

// for_each_message over an answer, with its NLMSG_ERROR taken apart: *err
// gets the error code (0 for an acknowledgement, which does not stop the
// walk; an error does), every other message goes to `fn`.
bool for_each_reply(std::span<const uint8_t> answer, int *err,
                    const std::function<bool(uint16_t, std::span<const uint8_t>)> &fn) {
    return for_each_message(answer, [&](uint16_t t, std::span<const uint8_t> body) {
        if (t != NLMSG_ERROR) return fn(t, body);
        *err = error_code(body);
        return *err == 0;
    });
}

Error kernel_error(const char *what, int negative_errno) {
    return Error{std::string(what) + ": " + std::strerror(-negative_errno)};
}

// ---- building requests ----------------------------------------------------------

template <class Body>
std::vector<uint8_t> message(uint16_t type, uint16_t flags, const Body &body) {
    std::vector<uint8_t> m(NLMSG_SPACE(sizeof(Body)));
    nlmsghdr h{};
    h.nlmsg_len = static_cast<uint32_t>(NLMSG_LENGTH(sizeof(Body)));
    h.nlmsg_type = type;
    h.nlmsg_flags = flags;
    std::memcpy(m.data(), &h, sizeof h);
    std::memcpy(m.data() + NLMSG_LENGTH(0), &body, sizeof body);
    return m;
}

void add_attr(std::vector<uint8_t> &m, uint16_t type, const void *data, size_t len) {
    const size_t at = NLMSG_ALIGN(m.size());
    m.resize(at + RTA_SPACE(len));
    rtattr a{};
    a.rta_len = static_cast<uint16_t>(RTA_LENGTH(len));
    a.rta_type = type;
    std::memcpy(m.data() + at, &a, sizeof a);
    std::memcpy(m.data() + at + RTA_LENGTH(0), data, len);
    const auto total = static_cast<uint32_t>(at + RTA_LENGTH(len));
    std::memcpy(m.data() + offsetof(nlmsghdr, nlmsg_len), &total, sizeof total);
}

void add_ipv4(std::vector<uint8_t> &m, uint16_t type, uint32_t ip) {
    const uint32_t be = htonl(ip);
    add_attr(m, type, &be, 4);
}

}  // namespace

std::string neighbor_state_name(uint16_t s) {
    if (s == NUD_NONE) return "none";
    std::string out;
    const std::pair<uint16_t, const char *> names[] = {
        {NUD_INCOMPLETE, "incomplete"}, {NUD_REACHABLE, "reachable"}, {NUD_STALE, "stale"},
        {NUD_DELAY, "delay"},           {NUD_PROBE, "probe"},         {NUD_FAILED, "failed"},
        {NUD_NOARP, "noarp"},           {NUD_PERMANENT, "permanent"}};
    for (const auto &[bit, name] : names)
        if (s & bit) out += (out.empty() ? "" : ",") + std::string(name);
    return out.empty() ? "unknown" : out;
}

// ---- parsers --------------------------------------------------------------------

Result<Route> parse_route(std::span<const uint8_t> answer) {
    std::optional<Route> route;
    int err = 0;
    uint8_t type = 0;
    const bool whole = for_each_reply(answer, &err, [&](uint16_t t, std::span<const uint8_t> body) {
        if (t != RTM_NEWROUTE || body.size() < sizeof(rtmsg)) return true;
        rtmsg rt;
        std::memcpy(&rt, body.data(), sizeof rt);
        type = rt.rtm_type;
        Route r;
        for_each_attr(body.subspan(NLMSG_ALIGN(sizeof(rtmsg))),
                      [&](uint16_t a, std::span<const uint8_t> v) {
                          if (a == RTA_GATEWAY) r.gateway = ipv4_attr(v).value_or(0);
                          if (a == RTA_PREFSRC) r.prefsrc = ipv4_attr(v).value_or(0);
                          if (a == RTA_OIF && v.size() == 4) std::memcpy(&r.oif, v.data(), 4);
                      });
        route = r;
        return false;
    });
    if (err < 0) return kernel_error("no route", err);
    if (!whole || !route) return Error{"the kernel's route answer is malformed"};
    if (type == RTN_LOCAL) return Error{"that is an address of this host"};
    if (type != RTN_UNICAST)
        return Error{"the kernel's route is not unicast (type " + std::to_string(type) + ")"};
    return *route;
}

Result<Neighbor> parse_neighbor(std::span<const uint8_t> answer) {
    std::optional<Neighbor> n;
    int err = 0;
    const bool whole = for_each_reply(answer, &err, [&](uint16_t t, std::span<const uint8_t> body) {
        if (t != RTM_NEWNEIGH || body.size() < sizeof(ndmsg)) return true;
        ndmsg nd;
        std::memcpy(&nd, body.data(), sizeof nd);
        Neighbor e;
        e.state = nd.ndm_state;
        std::optional<wire::MacAddr> mac;
        for_each_attr(body.subspan(NLMSG_ALIGN(sizeof(ndmsg))),
                      [&](uint16_t a, std::span<const uint8_t> v) {
                          if (a == NDA_LLADDR && v.size() == 6) {
                              wire::MacAddr m;
                              std::memcpy(m.b, v.data(), 6);
                              mac = m;
                          }
                      });
        constexpr uint16_t usable =
            NUD_REACHABLE | NUD_STALE | NUD_DELAY | NUD_PROBE | NUD_PERMANENT;
        if ((e.state & usable) && mac && !(*mac == wire::MacAddr{})) e.mac = mac;
        n = e;
        return false;
    });
    if (err == -ENOENT) return Neighbor{};
    if (err < 0) return kernel_error("neighbour", err);
    if (!whole || !n) return Error{"the kernel's neighbour answer is malformed"};
    return *n;
}

Result<std::vector<IfAddr>> parse_addresses(std::span<const uint8_t> answer, int ifindex) {
    std::vector<IfAddr> out;
    int err = 0;
    const bool whole = for_each_reply(answer, &err, [&](uint16_t t, std::span<const uint8_t> body) {
        if (t == NLMSG_DONE) return false;
        if (t != RTM_NEWADDR || body.size() < sizeof(ifaddrmsg)) return true;
        ifaddrmsg ia;
        std::memcpy(&ia, body.data(), sizeof ia);
        if (ia.ifa_family != AF_INET || static_cast<int>(ia.ifa_index) != ifindex ||
            ia.ifa_prefixlen > 32)
            return true;
        std::optional<uint32_t> local, address;
        for_each_attr(body.subspan(NLMSG_ALIGN(sizeof(ifaddrmsg))),
                      [&](uint16_t a, std::span<const uint8_t> v) {
                          if (a == IFA_LOCAL) local = ipv4_attr(v);
                          if (a == IFA_ADDRESS) address = ipv4_attr(v);
                      });
        // IFA_LOCAL is the interface's own address (IFA_ADDRESS the peer's
        // on a point-to-point link).
        if (const auto ip = local ? local : address)
            out.push_back({*ip, static_cast<int>(ia.ifa_prefixlen)});
        return true;
    });
    if (err < 0) return kernel_error("addresses", err);
    if (!whole) return Error{"the kernel's address answer is malformed"};
    return out;
}

// ---- the socket -----------------------------------------------------------------

Result<Netlink> Netlink::open() {
    const int fd = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (fd < 0) return Error{std::string("netlink socket: ") + std::strerror(errno)};
    timeval tv{1, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_nl local{};
    local.nl_family = AF_NETLINK;
    if (::bind(fd, reinterpret_cast<const sockaddr *>(&local), sizeof local) != 0) {
        const int e = errno;
        ::close(fd);
        return Error{std::string("netlink bind: ") + std::strerror(e)};
    }
    return Netlink(fd);
}

Netlink &Netlink::operator=(Netlink &&o) noexcept {
    if (this != &o) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = o.fd_;
        seq_ = o.seq_;
        o.fd_ = -1;
    }
    return *this;
}

Netlink::~Netlink() {
    if (fd_ >= 0) ::close(fd_);
}

Result<std::vector<uint8_t>> Netlink::request(std::vector<uint8_t> msg, bool dump) {
    const uint32_t seq = ++seq_;
    std::memcpy(msg.data() + offsetof(nlmsghdr, nlmsg_seq), &seq, sizeof seq);
    sockaddr_nl kernel{};
    kernel.nl_family = AF_NETLINK;
    if (::sendto(fd_, msg.data(), msg.size(), 0, reinterpret_cast<const sockaddr *>(&kernel),
                 sizeof kernel) < 0)
        return Error{std::string("netlink send: ") + std::strerror(errno)};
    std::vector<uint8_t> answer;
    std::vector<uint8_t> buf(32768);
    for (;;) {
        const ssize_t n = ::recv(fd_, buf.data(), buf.size(), 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            return Error{std::string("netlink receive: ") +
                         (errno == EAGAIN ? "no answer within a second" : std::strerror(errno))};
        }
        // Only this request's messages (a late answer to an earlier one
        // that timed out is dropped).
        bool done = !dump;
        bool ours = false;
        for_each_message(
            std::span(buf.data(), size_t(n)), [&](uint16_t t, std::span<const uint8_t> body) {
                const auto *h = reinterpret_cast<const uint8_t *>(body.data()) - sizeof(nlmsghdr);
                nlmsghdr hdr;
                std::memcpy(&hdr, h, sizeof hdr);
                if (hdr.nlmsg_seq != seq) return true;
                ours = true;
                answer.insert(answer.end(), h, h + hdr.nlmsg_len);
                answer.resize(NLMSG_ALIGN(answer.size()));
                if (t == NLMSG_DONE || t == NLMSG_ERROR) done = true;
                return true;
            });
        if (ours && done) break;
    }
    return answer;
}

Result<Route> Netlink::route_to(uint32_t dst, uint32_t src, int ifindex,
                                const std::vector<IfAddr> *known) {
    auto r = route_query(dst, src, ifindex);
    // A source the kernel does not have (EINVAL): the route without it.
    if (!r && src) r = route_query(dst, 0, ifindex);
    if (!r) return r;
    if (r->oif != ifindex) return Error{"the kernel routes it out of another interface"};
    if (r->gateway == 0) {
        // With an output interface given, the kernel assumes a destination
        // it has no route for is on the link: only true when an address
        // of the interface covers it.
        std::vector<IfAddr> read;
        if (!known) {
            auto a = addresses(ifindex);
            if (!a) return a.error();
            read = std::move(*a);
        }
        bool covered = false;
        for (const IfAddr &ia : known ? *known : read)
            covered = covered || ia.contains(dst);
        if (!covered) return Error{"no route to it through this interface"};
    }
    return r;
}

Result<Route> Netlink::route_query(uint32_t dst, uint32_t src, int ifindex) {
    rtmsg rt{};
    rt.rtm_family = AF_INET;
    rt.rtm_dst_len = 32;
    auto m = message(RTM_GETROUTE, NLM_F_REQUEST, rt);
    add_ipv4(m, RTA_DST, dst);
    if (src) {
        add_ipv4(m, RTA_SRC, src);
        // rtm_src_len of 32 goes with RTA_SRC.
        m[NLMSG_LENGTH(0) + offsetof(rtmsg, rtm_src_len)] = 32;
    }
    add_attr(m, RTA_OIF, &ifindex, sizeof ifindex);
    auto a = request(std::move(m), false);
    if (!a) return a.error();
    return parse_route(*a);
}

Result<Neighbor> Netlink::neighbor(int ifindex, uint32_t ip) {
    ndmsg nd{};
    nd.ndm_family = AF_INET;
    nd.ndm_ifindex = ifindex;
    auto m = message(RTM_GETNEIGH, NLM_F_REQUEST, nd);
    add_ipv4(m, NDA_DST, ip);
    auto a = request(std::move(m), false);
    if (!a) return a.error();
    return parse_neighbor(*a);
}

Result<void> Netlink::resolve(int ifindex, uint32_t ip) {
    ndmsg nd{};
    nd.ndm_family = AF_INET;
    nd.ndm_ifindex = ifindex;
    nd.ndm_state = NUD_PERMANENT;  // ignored with NTF_USE (as iproute2 sends it)
    nd.ndm_flags = NTF_USE;
    auto m = message(RTM_NEWNEIGH, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE, nd);
    add_ipv4(m, NDA_DST, ip);
    auto a = request(std::move(m), false);
    if (!a) return a.error();
    int err = 0;
    (void)for_each_reply(*a, &err, [](uint16_t, std::span<const uint8_t>) { return true; });
    if (err < 0) return kernel_error("resolve", err);
    return {};
}

Result<std::vector<IfAddr>> Netlink::addresses(int ifindex) {
    ifaddrmsg ia{};
    ia.ifa_family = AF_INET;
    ia.ifa_index = static_cast<uint32_t>(ifindex);
    auto a = request(message(RTM_GETADDR, NLM_F_REQUEST | NLM_F_DUMP, ia), true);
    if (!a) return a.error();
    return parse_addresses(*a, ifindex);
}

int ifindex(const std::string &iface) {
    return static_cast<int>(::if_nametoindex(iface.c_str()));
}

}  // namespace mrc::kernel
