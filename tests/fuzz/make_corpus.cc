// Writes the seed corpus of the fuzz targets: real frames of every MRC
// packet type (for fuzz_parse) and record sequences (for fuzz_responder).
// Run by hand after a wire-format change; the output is checked in.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "wire/host.h"
#include "wire/mrc.h"

using namespace mrc;
using namespace mrc::wire;

namespace {
void save(const std::string &path, const std::vector<uint8_t> &b) {
    FILE *f = std::fopen(path.c_str(), "wb");
    if (!f) return;
    std::fwrite(b.data(), 1, b.size(), f);
    std::fclose(f);
}
}  // namespace

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    const std::string dir = argv[1];
    MrcAddr a;
    a.src_ip = ipv4(10, 0, 0, 1);
    a.dst_ip = ipv4(10, 0, 0, 2);
    std::vector<std::vector<uint8_t>> frames;
    for (int imm = 0; imm < 2; ++imm) {
        for (uint32_t payload : {1u, 512u}) {
            std::vector<uint8_t> f(kMaxHdrBytes + payload, 0x11);
            DataFields d;
            d.opcode = imm ? Opcode::kWriteImm : Opcode::kWrite;
            d.flags = kFlagFirst | kFlagLast | kFlagAckReq;
            d.dst_qpn = 1;
            d.psn = Psn(0xfffff0);
            d.msg_bytes = payload;
            f.resize(write_data(f.data(), a, 3000, d, payload) + payload);
            frames.push_back(f);
        }
    }
    std::vector<uint8_t> s(kMaxHdrBytes);
    SackFields sf;
    sf.dst_qpn = 1;
    sf.cum_psn = Psn(0xfffff1);
    sf.bitmap = 0x5;
    sf.rwnd_units = 1;
    s.resize(write_sack(s.data(), a, 3000, sf));
    frames.push_back(s);
    std::vector<uint8_t> n(kMaxHdrBytes);
    NackFields nf;
    nf.dst_qpn = 1;
    nf.psn = Psn(0xfffff0);
    nf.rwnd_units = 1;
    n.resize(write_nack(n.data(), a, 3000, nf));
    frames.push_back(n);
    std::vector<uint8_t> pr(kMaxHdrBytes);
    ProbeFields pf;
    pf.dst_qpn = 1;
    pr.resize(write_probe(pr.data(), a, 3000, pf));
    frames.push_back(pr);
    std::vector<uint8_t> t = frames[1];
    t.resize(trim_data_packet(t.data(), uint32_t(t.size()), false));
    frames.push_back(t);
    if (dir.find("parse") != std::string::npos) {
        // What a host answers (wire/host.h): an ARP request for 10.0.0.2
        // and a ping of it (the MRC data frame with its IP protocol and
        // first bytes turned into an ICMP echo request; checksums are
        // wrong, which the fuzzer's mutations get past or not).
        std::vector<uint8_t> ar(kArpFrameBytes);
        write_arp_request(ar.data(), MacAddr{{2, 0, 0, 0, 0, 1}}, a.src_ip, a.dst_ip);
        frames.push_back(ar);
        std::vector<uint8_t> ping = frames[1];
        ping[sizeof(EthHdr) + 9] = kIpProtoIcmp;
        ping[kEthIpv4UdpBytes - sizeof(UdpHdr)] = kIcmpEchoRequest;
        frames.push_back(ping);
        // The MRC data packet over IPv6 (the EV in the flow label), plain
        // and behind a destination-options header.
        const std::vector<uint8_t> &d4 = frames[1];
        const size_t mrc_len = d4.size() - kEthIpv4UdpBytes;
        std::vector<uint8_t> d6(kEthIpv6UdpBytes + mrc_len);
        Udp6FrameSpec s6;
        s6.src_ip = Ipv6Addr{{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1}};
        s6.dst_ip = Ipv6Addr{{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 2}};
        s6.src_port = 3000;
        s6.dst_port = kDefaultMrcPort;
        s6.flow_label = flow_label_of_ev(3000);
        write_eth_ipv6_udp(d6.data(), s6, uint16_t(mrc_len));
        std::copy(d4.begin() + kEthIpv4UdpBytes, d4.end(), d6.begin() + kEthIpv6UdpBytes);
        fill_udp_checksum(d6.data());
        frames.push_back(d6);
        const size_t l3 = sizeof(EthHdr) + sizeof(Ipv6Hdr);
        std::vector<uint8_t> x6(d6.size() + 8, 0);
        std::copy(d6.begin(), d6.begin() + long(l3), x6.begin());
        const uint8_t opts[8] = {kIpProtoUdp, 0, 1, 4, 0, 0, 0, 0};  // destination options, PadN
        std::copy(opts, opts + 8, x6.begin() + long(l3));
        std::copy(d6.begin() + long(l3), d6.end(), x6.begin() + long(l3) + 8);
        auto *ip6 = reinterpret_cast<Ipv6Hdr *>(x6.data() + sizeof(EthHdr));
        ip6->next_header = kIpv6DestOpts;
        ip6->payload_length.set(uint16_t(ip6->payload_length.get() + 8));
        frames.push_back(x6);
        // IPv6 neighbour discovery: a solicitation for the receiver's
        // address (its target at byte 62, where fuzz_parse takes its own
        // address from) and an unsolicited advert.
        std::vector<uint8_t> ns(kNdFrameBytes), na(kNdFrameBytes);
        write_nd_solicit(ns.data(), MacAddr{{2, 0, 0, 0, 0, 1}}, s6.src_ip, s6.dst_ip);
        frames.push_back(ns);
        write_nd_announce(na.data(), MacAddr{{2, 0, 0, 0, 0, 1}}, s6.src_ip);
        frames.push_back(na);
        for (size_t i = 0; i < frames.size(); ++i)
            save(dir + "/frame" + std::to_string(i), frames[i]);
        return 0;
    }
    // Responder records: the MRC part of each frame (after UDP), prefixed.
    std::vector<uint8_t> seq;
    for (size_t i = 0; i < frames.size(); ++i) {
        const auto &f = frames[i];
        const size_t len = f.size() - kEthIpv4UdpBytes;
        std::vector<uint8_t> one(3 + len);
        one[0] = uint8_t(i & 1);
        one[1] = uint8_t(len >> 8);
        one[2] = uint8_t(len);
        std::copy(f.begin() + kEthIpv4UdpBytes, f.end(), one.begin() + 3);
        save(dir + "/record" + std::to_string(i), one);
        seq.insert(seq.end(), one.begin(), one.end());
    }
    save(dir + "/sequence", seq);
    return 0;
}
