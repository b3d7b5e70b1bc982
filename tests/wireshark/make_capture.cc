// Writes a pcap with one of each MRC packet type, built by lib/wire with the
// field values that dissector_test.sh expects tshark to decode: a golden
// capture for the Wireshark dissector (scripts/wireshark/mrc.lua). Also one
// non-MRC UDP datagram (port 33333), which must not be decoded as MRC, and
// two MRC packets that break the wire format, which it must flag.
//
//   make_capture OUT.pcap
#include <pcap/pcap.h>

#include <cstdio>
#include <vector>

#include "wire/mrc.h"

using namespace mrc;
using namespace mrc::wire;

namespace {

pcap_dumper_t *g_out;
int g_count;

void emit(std::vector<uint8_t> frame, bool udp_cksum = true) {
    if (udp_cksum) fill_udp_checksum(frame.data());
    pcap_pkthdr h{};
    h.ts.tv_sec = 1'700'000'000;
    h.ts.tv_usec = ++g_count;
    h.caplen = h.len = uint32_t(frame.size());
    pcap_dump(reinterpret_cast<u_char *>(g_out), &h, frame.data());
}

MrcAddr addr(bool reverse) {
    MrcAddr a;
    a.src_mac = {{0x02, 0, 0, 0, 0, reverse ? uint8_t(2) : uint8_t(1)}};
    a.dst_mac = {{0x02, 0, 0, 0, 0, reverse ? uint8_t(1) : uint8_t(2)}};
    a.src_ip = reverse ? ipv4(10, 10, 0, 2) : ipv4(10, 10, 0, 1);
    a.dst_ip = reverse ? ipv4(10, 10, 0, 1) : ipv4(10, 10, 0, 2);
    a.dscp = 26;          // data: AF31
    a.dscp_control = 46;  // acks, NACKs, probes: EF
    return a;
}

std::vector<uint8_t> data(uint16_t ev, const DataFields &f, uint32_t payload) {
    std::vector<uint8_t> fr(kMaxHdrBytes + payload);
    const uint16_t h = write_data(fr.data(), addr(false), ev, f, payload);
    fr.resize(h + payload);
    for (uint32_t i = 0; i < payload; ++i)
        fr[h + i] = uint8_t(i);
    return fr;
}

}  // namespace

int main(int argc, char **argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: make_capture OUT.pcap\n");
        return 2;
    }
    pcap_t *p = pcap_open_dead(DLT_EN10MB, 65535);
    g_out = p ? pcap_dump_open(p, argv[1]) : nullptr;
    if (g_out == nullptr) {
        std::fprintf(stderr, "make_capture: cannot write %s\n", argv[1]);
        return 1;
    }
    // 1: WRITE, first packet of a message, ack requested.
    DataFields w;
    w.opcode = Opcode::kWrite;
    w.flags = kFlagFirst | kFlagAckReq;
    w.dst_qpn = 0x0a0b0c;
    w.psn = Psn(100);
    w.msn = 3;
    w.msg_offset = 0;
    w.tx_ts = 0x11223344;
    w.remote_addr = 0x7f0000001000;
    w.rkey = 0xbeef;
    emit(data(40001, w, 1000));
    // 2: WRITE_IMM, last packet: carries the ImmHdr.
    DataFields wi = w;
    wi.opcode = Opcode::kWriteImm;
    wi.flags = kFlagLast;
    wi.psn = Psn(101);
    wi.msg_offset = 1000;
    wi.remote_addr = w.remote_addr + 1000;
    wi.imm = 0xcafe;
    wi.msg_bytes = 1500;
    emit(data(40002, wi, 500));
    // 3: a retransmitted WRITE trimmed by the last hop.
    DataFields wt = w;
    wt.flags = kFlagRetx;
    wt.psn = Psn(102);
    wt.msg_offset = 1400;
    auto t = data(40003, wt, 1400);
    t.resize(trim_data_packet(t.data(), uint32_t(t.size()), true));
    emit(t);
    // 4: SACK: cumulative 98, PSNs 100 and 102 selectively (offset 2, bits 0 and 2).
    SackFields s;
    s.dst_qpn = 0x000777;
    s.cum_psn = Psn(98);
    s.trigger_psn = Psn(102);
    s.sack_offset = 2;
    s.ev_echo = 40003;
    s.bitmap = 0x5;
    s.ts_echo = 0x11223344;
    s.rwnd_units = 12;
    s.flags = kAckEcnEcho | kAckDelayed;
    s.plane_status = 0x3;
    std::vector<uint8_t> fr(kMaxHdrBytes);
    fr.resize(write_sack(fr.data(), addr(true), 50001, s));
    emit(fr);
    // 5: NACK: PSN 102 trimmed by the last hop.
    NackFields n;
    n.dst_qpn = 0x000777;
    n.psn = Psn(102);
    n.reason = NackReason::kTrimmedLastHop;
    n.ev_echo = 40003;
    n.cum_psn = Psn(99);
    n.ts_echo = 0x55667788;
    n.rwnd_units = 7;
    n.plane_status = 0xf;
    fr.assign(kMaxHdrBytes, 0);
    fr.resize(write_nack(fr.data(), addr(true), 50002, n));
    emit(fr);
    // 6: NACK: remote access error, CE echoed.
    n.reason = NackReason::kRemoteAccess;
    n.flags = kAckEcnEcho;
    n.psn = Psn(103);
    fr.assign(kMaxHdrBytes, 0);
    fr.resize(write_nack(fr.data(), addr(true), 50003, n));
    emit(fr);
    // 7, 8: a reverse PROBE on EV 40005 and its reply.
    ProbeFields pr;
    pr.flags = kProbeReverse;
    pr.dst_qpn = 0x0a0b0c;
    pr.probe_id = 0x00020007;
    pr.ev = 40005;
    pr.ts = 123456789;
    pr.plane_status = 0x1;
    fr.assign(kMaxHdrBytes, 0);
    fr.resize(write_probe(fr.data(), addr(false), 40005, pr));
    emit(fr);
    pr.reply = true;
    pr.dst_qpn = 0x000777;
    fr.assign(kMaxHdrBytes, 0);
    fr.resize(write_probe(fr.data(), addr(true), 50004, pr));
    emit(fr);
    // 9: not MRC (UDP to port 33333).
    UdpFrameSpec u;
    u.src_ip = ipv4(10, 10, 0, 1);
    u.dst_ip = ipv4(10, 10, 0, 2);
    u.src_port = 40006;
    u.dst_port = 33333;  // no Wireshark dissector: shown as data
    fr.assign(kEthIpv4UdpBytes + 20, 0x41);
    write_eth_ipv4_udp(fr.data(), u, 20);
    emit(fr);
    // 10, 11: wire-format violations the dissector must flag as errors.
    // A WRITE whose payload is shorter than its RETH says (UDP length agrees
    // with the bytes sent, the RETH does not).
    auto bad = data(40007, w, 1000);
    bad.resize(bad.size() - 100);
    {
        auto *ip = reinterpret_cast<Ipv4Hdr *>(bad.data() + sizeof(EthHdr));
        auto *udp = reinterpret_cast<UdpHdr *>(bad.data() + sizeof(EthHdr) + sizeof(Ipv4Hdr));
        ip->total_length.set(uint16_t(bad.size() - sizeof(EthHdr)));
        ip->checksum.set(0);
        ip->checksum.set(ipv4_header_checksum(*ip));
        udp->length.set(uint16_t(bad.size() - sizeof(EthHdr) - sizeof(Ipv4Hdr)));
    }
    emit(bad);
    // A NACK to QPN 0 with an ack flag NACKs do not have (DUPLICATE).
    n.dst_qpn = 0;
    n.flags = kAckDuplicate;
    fr.assign(kMaxHdrBytes, 0);
    fr.resize(write_nack(fr.data(), addr(true), 50005, n));
    emit(fr);
    pcap_dump_close(g_out);
    pcap_close(p);
    std::printf("make_capture: %d frames to %s\n", g_count, argv[1]);
    return 0;
}
