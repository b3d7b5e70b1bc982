-- Wireshark dissector for MRC (Multipath Reliable Connection) over UDP, as
-- this project puts it on the wire: docs/wire-format.md is the reference
-- for every field below.
--
-- Use:   wireshark -X lua_script:scripts/wireshark/mrc.lua capture.pcap
--        tshark -X lua_script:scripts/wireshark/mrc.lua -r capture.pcap -Y mrc
-- or copy it to ~/.local/lib/wireshark/plugins/. The UDP port (4797 by
-- default) is a preference: Edit > Preferences > Protocols > MRC.
--
-- The UDP source port is MRC's entropy value, by default drawn from the
-- dynamic range 49152-65535 (as RoCEv2's), above the MRC port, so Wireshark
-- gives the datagram to the MRC port's dissector (the lower port's). A
-- sender configured with a wider range (ev_range / --ev-range) may use an
-- EV below the MRC port that another dissector is registered on (BATMAN's
-- 4305, ...), which then wins; for such captures turn on
-- UDP's "Try heuristic sub-dissectors first"
-- (-o udp.try_heuristic_first:TRUE): this script's heuristic then claims
-- every datagram to the MRC port whose base header is MRC's.
--
-- Filter fields start with "mrc.": mrc.opcode, mrc.psn, mrc.dst_qpn, mrc.ev,
-- mrc.sack.bitmap, mrc.ev_echo, mrc.nack.reason, ... Problems in a packet
-- (bad version, reserved bits set, lengths that disagree) are expert-info
-- errors, so "_ws.expert.severity == error" finds them.

local mrc = Proto("mrc", "Multipath Reliable Connection")

local DEFAULT_PORT = 4797

local opcodes = {
    [0x01] = "WRITE",
    [0x02] = "WRITE_IMM",
    [0x10] = "SACK",
    [0x11] = "NACK",
    [0x20] = "PROBE",
    [0x21] = "PROBE_REPLY",
    [0x30] = "CONNECT",
    [0x31] = "ACCEPT",
    [0x32] = "REJECT",
    [0x33] = "DISCONNECT",
}
local nack_reasons = {
    [0x01] = "TRIMMED",
    [0x02] = "TRIMMED_LAST_HOP",
    [0x0a] = "NO_RESOURCE",
    [0x0b] = "PSN_OUT_OF_WINDOW",
    [0x19] = "UNEXPECTED",
    [0x1a] = "REMOTE_ACCESS",
}

local f = mrc.fields
-- BaseHdr (12 bytes, every packet)
f.opcode = ProtoField.uint8("mrc.opcode", "Opcode", base.HEX, opcodes)
f.flags = ProtoField.uint8("mrc.flags", "Flags", base.HEX)
f.flag_ack_req = ProtoField.bool("mrc.flags.ack_req", "ACK_REQ", 8, nil, 0x01)
f.flag_syn = ProtoField.bool("mrc.flags.syn", "SYN", 8, nil, 0x02)
f.flag_first = ProtoField.bool("mrc.flags.first", "FIRST", 8, nil, 0x04)
f.flag_last = ProtoField.bool("mrc.flags.last", "LAST", 8, nil, 0x08)
f.flag_retx = ProtoField.bool("mrc.flags.retx", "RETX", 8, nil, 0x10)
f.flag_undef = ProtoField.bool("mrc.flags.undefined", "Undefined (0x20)", 8, nil, 0x20)
f.flag_trim_last = ProtoField.bool("mrc.flags.trim_last_hop", "TRIM_LAST_HOP", 8, nil, 0x40)
f.flag_trimmed = ProtoField.bool("mrc.flags.trimmed", "TRIMMED", 8, nil, 0x80)
f.version = ProtoField.uint8("mrc.version", "Version", base.DEC)
f.reserved = ProtoField.bytes("mrc.reserved", "Reserved")
f.dst_qpn = ProtoField.uint24("mrc.dst_qpn", "Destination QPN", base.DEC_HEX)
f.psn = ProtoField.uint24("mrc.psn", "PSN", base.DEC)
f.ev = ProtoField.uint16("mrc.ev", "Entropy value (UDP source port)", base.DEC)
local classes = { [0] = "data", [1] = "control", [2] = "connection management" }
f.class = ProtoField.uint8("mrc.class", "Traffic class", base.DEC, classes)
f.dscp = ProtoField.uint8("mrc.dscp", "DSCP (of the IPv4 header)", base.DEC)
f.ect = ProtoField.bool("mrc.ect", "ECN-capable transport (ECT)")
-- DataHdr, RETH, ImmHdr
f.msn = ProtoField.uint32("mrc.msn", "Message sequence number", base.DEC)
f.msg_offset = ProtoField.uint32("mrc.msg_offset", "Message offset", base.DEC)
f.tx_ts = ProtoField.uint32("mrc.tx_ts", "Transmit timestamp (ns, low 32 bits)", base.DEC)
f.remote_addr = ProtoField.uint64("mrc.reth.remote_addr", "Remote address", base.HEX)
f.rkey = ProtoField.uint32("mrc.reth.rkey", "Remote key", base.HEX)
f.length = ProtoField.uint32("mrc.reth.length", "Payload length (as sent)", base.DEC)
f.imm = ProtoField.uint32("mrc.imm", "Immediate data", base.HEX)
f.msg_bytes = ProtoField.uint32("mrc.imm.msg_bytes", "Message length", base.DEC)
f.payload = ProtoField.bytes("mrc.payload", "Payload")
-- SACK
f.trigger_psn = ProtoField.uint24("mrc.sack.trigger_psn", "Trigger PSN", base.DEC)
f.sack_offset = ProtoField.uint16("mrc.sack.offset", "SACK offset", base.DEC)
f.ev_echo = ProtoField.uint16("mrc.ev_echo", "EV echo", base.DEC)
f.bitmap = ProtoField.uint64("mrc.sack.bitmap", "SACK bitmap", base.HEX)
f.sacked = ProtoField.uint24("mrc.sack.psn", "Selectively acked PSN", base.DEC)
f.sacked_count = ProtoField.uint8("mrc.sack.count", "PSNs in the bitmap", base.DEC)
f.ts_echo = ProtoField.uint32("mrc.ts_echo", "Timestamp echo", base.DEC)
f.rwnd = ProtoField.uint16("mrc.rwnd_units", "Receive window (128-PSN units)", base.DEC)
f.ack_flags = ProtoField.uint8("mrc.ack.flags", "Ack flags", base.HEX)
f.ack_ecn = ProtoField.bool("mrc.ack.flags.ecn_echo", "ECN_ECHO", 8, nil, 0x01)
f.ack_dup = ProtoField.bool("mrc.ack.flags.duplicate", "DUPLICATE", 8, nil, 0x02)
f.ack_delayed = ProtoField.bool("mrc.ack.flags.delayed", "DELAYED", 8, nil, 0x04)
f.plane_status = ProtoField.uint8("mrc.plane_status", "Plane status (bit p: plane p in use)", base.HEX)
-- NACK
f.reason = ProtoField.uint8("mrc.nack.reason", "Reason", base.HEX, nack_reasons)
f.cum_psn = ProtoField.uint24("mrc.nack.cum_psn", "Cumulative PSN", base.DEC)
-- PROBE, PROBE_REPLY
f.probe_id = ProtoField.uint32("mrc.probe.id", "Probe id", base.HEX)
f.probe_ev = ProtoField.uint16("mrc.probe.ev", "Probed EV", base.DEC)
f.probe_ts = ProtoField.uint32("mrc.probe.ts", "Timestamp", base.DEC)
f.probe_flags = ProtoField.uint8("mrc.probe.flags", "Probe flags", base.HEX)
f.probe_reverse = ProtoField.bool("mrc.probe.flags.reverse", "REVERSE (tests the prober's ack EV)", 8, nil, 0x01)
f.probe_keepalive = ProtoField.bool("mrc.probe.flags.keepalive", "KEEPALIVE (liveness only)", 8, nil, 0x02)
-- Connection management (mrcd)
local cm_reasons = { [1] = "no listener", [2] = "no resources", [3] = "bad request" }
f.cm_conn_id = ProtoField.uint64("mrc.cm.conn_id", "Connection id", base.HEX)
f.cm_service = ProtoField.uint32("mrc.cm.service", "Service", base.DEC)
f.cm_src_qpn = ProtoField.uint32("mrc.cm.src_qpn", "Sender's QPN", base.DEC)
f.cm_dst_qpn = ProtoField.uint32("mrc.cm.dst_qpn", "Receiver's QPN", base.DEC)
f.cm_psn = ProtoField.uint32("mrc.cm.psn", "First PSN", base.DEC)
f.cm_planes = ProtoField.uint8("mrc.cm.planes", "Planes", base.DEC)
f.cm_mtu = ProtoField.uint16("mrc.cm.mtu_payload", "Largest data payload per packet", base.DEC)
f.cm_reason = ProtoField.uint8("mrc.cm.reason", "Reject reason", base.DEC, cm_reasons)
f.cm_mac = ProtoField.ether("mrc.cm.mac", "MAC")
f.cm_ip = ProtoField.ipv4("mrc.cm.ip", "IPv4")

local e_malformed = ProtoExpert.new("mrc.malformed", "Malformed MRC packet", expert.group.MALFORMED,
                                    expert.severity.ERROR)
local e_proto = ProtoExpert.new("mrc.violation", "MRC protocol violation", expert.group.PROTOCOL,
                                expert.severity.ERROR)
local e_trimmed = ProtoExpert.new("mrc.trimmed", "Payload trimmed by the network",
                                  expert.group.SEQUENCE, expert.severity.NOTE)
mrc.experts = { e_malformed, e_proto, e_trimmed }

local prefs = mrc.prefs
prefs.udp_port = Pref.uint("UDP port", DEFAULT_PORT, "UDP destination port of MRC")

local udp_srcport = Field.new("udp.srcport")
local ip_dscp = Field.new("ip.dsfield.dscp")
local ip_ecn = Field.new("ip.dsfield.ecn")

local BASE, DATA, RETH, IMM, SACK, NACK, PROBE = 12, 12, 16, 8, 24, 16, 12

local function check_zero(tree, tvb_range, what)
    if tvb_range:len() > 0 then
        for i = 0, tvb_range:len() - 1 do
            if tvb_range(i, 1):uint() ~= 0 then
                tree:add_proto_expert_info(e_proto, what .. " not zero")
                return
            end
        end
    end
end

local function flag_names(v)
    local names = {}
    local bits = { [0x01] = "ACK_REQ", [0x02] = "SYN", [0x04] = "FIRST", [0x08] = "LAST",
                   [0x10] = "RETX", [0x40] = "TRIM_LAST_HOP", [0x80] = "TRIMMED" }
    for _, bit in ipairs({ 0x01, 0x02, 0x04, 0x08, 0x10, 0x40, 0x80 }) do
        if math.floor(v / bit) % 2 == 1 then names[#names + 1] = bits[bit] end
    end
    return table.concat(names, ",")
end

-- Ack flags: SACKs define 0x01-0x04, NACKs only 0x01 (ECN_ECHO).
local function add_ack_flags(tree, r, allowed)
    local t = tree:add(f.ack_flags, r)
    t:add(f.ack_ecn, r)
    t:add(f.ack_dup, r)
    t:add(f.ack_delayed, r)
    local v = r:uint()
    for _, bit in ipairs({ 0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80 }) do
        if math.floor(v / bit) % 2 == 1 and math.floor(allowed / bit) % 2 == 0 then
            t:add_proto_expert_info(e_proto, string.format("ack flag 0x%02x is not allowed here", bit))
        end
    end
    return v
end

-- Lengths: the frame as sent (reported), not as captured (a capture may
-- keep only the first bytes of each frame).
local function sent_len(tvb)
    return tvb:reported_length_remaining()
end

-- A control packet must be exactly its headers long.
local function check_exact(tree, tvb, want, what)
    if sent_len(tvb) ~= want then
        tree:add_proto_expert_info(e_malformed, string.format("%s of %d bytes: it is %d",
                                                              what, sent_len(tvb), want))
    end
end

local function dissect_data(tvb, pinfo, tree, opcode, flags, psn)
    local need = BASE + DATA + RETH
    local last = math.floor(flags / 8) % 2 == 1
    local imm = opcode == 0x02 and last
    if imm then need = need + IMM end
    if sent_len(tvb) < need then
        tree:add_proto_expert_info(e_malformed, string.format("%d bytes: a data packet needs %d",
                                                              sent_len(tvb), need))
        return
    end
    if tvb:len() < need then return end  -- captured short: nothing more to show
    local o = BASE
    tree:add(f.msn, tvb(o, 4))
    tree:add(f.msg_offset, tvb(o + 4, 4))
    tree:add(f.tx_ts, tvb(o + 8, 4))
    o = o + DATA
    local reth = tree:add(mrc, tvb(o, RETH), "RETH")
    reth:add(f.remote_addr, tvb(o, 8))
    reth:add(f.rkey, tvb(o + 8, 4))
    reth:add(f.length, tvb(o + 12, 4))
    local length = tvb(o + 12, 4):uint()
    o = o + RETH
    if imm then
        local it = tree:add(mrc, tvb(o, IMM), "ImmHdr")
        it:add(f.imm, tvb(o, 4))
        it:add(f.msg_bytes, tvb(o + 4, 4))
        if tvb(o + 4, 4):uint() ~= tvb(BASE + 4, 4):uint() + length then
            it:add_proto_expert_info(e_proto, "message length is not offset + length")
        end
        o = o + IMM
    end
    local trimmed = flags >= 0x80
    local rest = sent_len(tvb) - o
    local captured = tvb:len() - o
    if trimmed then
        tree:add_proto_expert_info(e_trimmed)
        if rest ~= 0 then
            tree:add_proto_expert_info(e_malformed, "a trimmed packet carries no payload")
        end
    else
        if rest ~= length then
            tree:add_proto_expert_info(e_malformed, string.format(
                "payload is %d bytes, the RETH says %d", rest, length))
        elseif rest == 0 then
            tree:add_proto_expert_info(e_malformed, "a data packet without payload")
        end
        if captured > 0 then tree:add(f.payload, tvb(o, captured)) end
    end
    pinfo.cols.info:append(string.format(" PSN=%d MSN=%d off=%d len=%d", psn,
                                         tvb(BASE, 4):uint(), tvb(BASE + 4, 4):uint(), length))
end

local function dissect_sack(tvb, pinfo, tree, psn)
    check_exact(tree, tvb, BASE + SACK, "SACK")
    if tvb:len() < BASE + SACK then return end
    local o = BASE
    check_zero(tree, tvb(o, 1), "reserved byte")
    tree:add(f.trigger_psn, tvb(o + 1, 3))
    tree:add(f.sack_offset, tvb(o + 4, 2))
    tree:add(f.ev_echo, tvb(o + 6, 2))
    local bt = tree:add(f.bitmap, tvb(o + 8, 8))
    tree:add(f.ts_echo, tvb(o + 16, 4))
    tree:add(f.rwnd, tvb(o + 20, 2))
    add_ack_flags(tree, tvb(o + 22, 1), 0x07)
    tree:add(f.plane_status, tvb(o + 23, 1))
    -- The PSNs the bitmap acknowledges: bit i is cum + offset + i.
    local first = psn + tvb(o + 4, 2):uint()
    local hi, lo = tvb(o + 8, 4):uint(), tvb(o + 12, 4):uint()
    local count, shown = 0, {}
    for i = 0, 63 do
        local word = i < 32 and lo or hi
        if math.floor(word / 2 ^ (i % 32)) % 2 == 1 then
            local p = (first + i) % 0x1000000
            bt:add(f.sacked, tvb(o + 8, 8), p):set_generated()
            count = count + 1
            if #shown < 4 then shown[#shown + 1] = tostring(p) end
        end
    end
    bt:add(f.sacked_count, tvb(o + 8, 8), count):set_generated()
    pinfo.cols.info:append(string.format(" cum=%d trigger=%d ev_echo=%d sacked=%d%s", psn,
                                         tvb(o + 1, 3):uint(), tvb(o + 6, 2):uint(), count,
                                         count > 0 and (" [" .. table.concat(shown, ",") ..
                                             (count > 4 and ",..." or "") .. "]") or ""))
end

local function dissect_nack(tvb, pinfo, tree, psn)
    check_exact(tree, tvb, BASE + NACK, "NACK")
    if tvb:len() < BASE + NACK then return end
    local o = BASE
    local rt = tree:add(f.reason, tvb(o, 1))
    local reason = tvb(o, 1):uint()
    if nack_reasons[reason] == nil then rt:add_proto_expert_info(e_proto, "unknown NACK reason") end
    add_ack_flags(tree, tvb(o + 1, 1), 0x01)
    tree:add(f.ev_echo, tvb(o + 2, 2))
    check_zero(tree, tvb(o + 4, 1), "reserved byte")
    tree:add(f.cum_psn, tvb(o + 5, 3))
    tree:add(f.ts_echo, tvb(o + 8, 4))
    tree:add(f.rwnd, tvb(o + 12, 2))
    check_zero(tree, tvb(o + 14, 1), "reserved byte")
    tree:add(f.plane_status, tvb(o + 15, 1))
    pinfo.cols.info:append(string.format(" %s PSN=%d cum=%d ev_echo=%d",
                                         nack_reasons[reason] or "?", psn, tvb(o + 5, 3):uint(),
                                         tvb(o + 2, 2):uint()))
end

local function dissect_probe(tvb, pinfo, tree)
    check_exact(tree, tvb, BASE + PROBE, "probe")
    if tvb:len() < BASE + PROBE then return end
    if tvb(9, 3):uint() ~= 0 then tree:add_proto_expert_info(e_proto, "a probe's PSN is 0") end
    local o = BASE
    tree:add(f.probe_id, tvb(o, 4))
    tree:add(f.probe_ev, tvb(o + 4, 2))
    local pflags = tvb(o + 6, 1):uint()
    local pft = tree:add(f.probe_flags, tvb(o + 6, 1))
    pft:add(f.probe_reverse, tvb(o + 6, 1))
    pft:add(f.probe_keepalive, tvb(o + 6, 1))
    if pflags >= 4 then pft:add_proto_expert_info(e_proto, "undefined probe flags") end
    tree:add(f.plane_status, tvb(o + 7, 1))
    tree:add(f.probe_ts, tvb(o + 8, 4))
    local kind = ""
    if pflags % 2 == 1 then kind = " REVERSE" end
    if math.floor(pflags / 2) % 2 == 1 then kind = kind .. " KEEPALIVE" end
    pinfo.cols.info:append(string.format(" id=0x%08x ev=%d%s", tvb(o, 4):uint(), tvb(o + 4, 2):uint(), kind))
end

local CM = 108

local function dissect_cm(tvb, pinfo, tree, opcode)
    check_exact(tree, tvb, BASE + CM, "connection-management frame")
    if tvb:len() < BASE + CM then return end
    local o = BASE
    tree:add(f.cm_conn_id, tvb(o, 8))
    if opcode == 0x30 then tree:add(f.cm_service, tvb(o + 8, 4)) end
    tree:add(f.cm_src_qpn, tvb(o + 12, 4))
    tree:add(f.cm_dst_qpn, tvb(o + 16, 4))
    tree:add(f.cm_psn, tvb(o + 20, 4))
    local planes = tvb(o + 24, 1):uint()
    local pt = tree:add(f.cm_planes, tvb(o + 24, 1))
    if planes > 8 then pt:add_proto_expert_info(e_proto, "more than 8 planes") end
    if opcode == 0x32 then tree:add(f.cm_reason, tvb(o + 25, 1)) end
    if opcode == 0x30 or opcode == 0x31 then
        local mt = tree:add(f.cm_mtu, tvb(o + 26, 2))
        if tvb(o + 26, 2):uint() == 0 then mt:append_text(" (not said)") end
    else
        check_zero(tree, tvb(o + 26, 2), "mtu_payload (CONNECT and ACCEPT only)")
    end
    for p = 0, math.min(planes, 8) - 1 do
        local a = tree:add(mrc, tvb(o + 28 + 10 * p, 10), string.format("Plane %d", p))
        a:add(f.cm_mac, tvb(o + 28 + 10 * p, 6))
        a:add(f.cm_ip, tvb(o + 34 + 10 * p, 4))
    end
    if opcode == 0x30 then
        pinfo.cols.info:append(string.format(" service=%d qpn=%d", tvb(o + 8, 4):uint(), tvb(o + 12, 4):uint()))
    else
        pinfo.cols.info:append(string.format(" qpn=%d -> %d", tvb(o + 12, 4):uint(), tvb(o + 16, 4):uint()))
    end
end

function mrc.dissector(tvb, pinfo, tree)
    pinfo.cols.protocol = "MRC"
    local t = tree:add(mrc, tvb(), "Multipath Reliable Connection")
    if sent_len(tvb) < BASE then
        t:add_proto_expert_info(e_malformed, "shorter than the 12-byte base header")
        return
    end
    if tvb:len() < BASE then return end
    local opcode = tvb(0, 1):uint()
    local flags = tvb(1, 1):uint()
    local psn = tvb(9, 3):uint()
    local ot = t:add(f.opcode, tvb(0, 1))
    local ft = t:add(f.flags, tvb(1, 1))
    ft:append_text(" (" .. flag_names(flags) .. ")")
    for _, fl in ipairs({ f.flag_ack_req, f.flag_syn, f.flag_first, f.flag_last, f.flag_retx,
                          f.flag_undef, f.flag_trim_last, f.flag_trimmed }) do
        ft:add(fl, tvb(1, 1))
    end
    if math.floor(flags / 0x20) % 2 == 1 then ft:add_proto_expert_info(e_proto, "undefined flag 0x20") end
    if math.floor(flags / 0x40) % 2 == 1 and flags < 0x80 then
        ft:add_proto_expert_info(e_proto, "TRIM_LAST_HOP without TRIMMED")
    end
    local vt = t:add(f.version, tvb(2, 1))
    if tvb(2, 1):uint() ~= 1 then vt:add_proto_expert_info(e_proto, "version is not 1") end
    check_zero(t, tvb(3, 2), "reserved bytes 3-4")
    local qt = t:add(f.dst_qpn, tvb(5, 3))
    local is_cm = tvb(0, 1):uint() >= 0x30 and tvb(0, 1):uint() <= 0x33
    if tvb(5, 3):uint() == 0 and not is_cm then
        qt:add_proto_expert_info(e_proto, "QPN 0 is never valid")
    elseif tvb(5, 3):uint() ~= 0 and is_cm then
        qt:add_proto_expert_info(e_proto, "connection management goes to QPN 0")
    end
    check_zero(t, tvb(8, 1), "reserved byte 8")
    t:add(f.psn, tvb(9, 3))
    local sp = udp_srcport()
    if sp then t:add(f.ev, sp.range, sp.value):set_generated() end
    -- The traffic class: data, control (acks, NACKs, probes) or CM, each
    -- with a DSCP of its own (the sender's configuration); MRC's data and
    -- control packets are ECN-capable, CM frames are not.
    local ds, ecn = ip_dscp(), ip_ecn()
    if ds and ecn then
        local is_data = opcode == 0x01 or opcode == 0x02
        local cls = is_data and 0 or (is_cm and 2 or 1)
        t:add(f.class, cls):set_generated()
        t:add(f.dscp, ds.range, ds.value):set_generated()
        local et = t:add(f.ect, ecn.range, ecn.value ~= 0)
        et:set_generated()
        if cls ~= 2 and ecn.value == 0 then
            et:add_proto_expert_info(e_proto, "MRC data and control packets are sent ECN-capable")
        end
    end

    local name = opcodes[opcode]
    if name == nil then
        ot:add_proto_expert_info(e_proto, "unknown opcode")
        pinfo.cols.info = string.format("MRC opcode 0x%02x", opcode)
        return
    end
    pinfo.cols.info = string.format("%s QPN=%d", name, tvb(5, 3):uint())
    if flags ~= 0 then pinfo.cols.info:append(" [" .. flag_names(flags) .. "]") end
    t:append_text(", " .. name)
    if opcode == 0x01 or opcode == 0x02 then
        dissect_data(tvb, pinfo, t, opcode, flags, psn)
    else
        if flags ~= 0 then ft:add_proto_expert_info(e_proto, "control packets carry no flags") end
        if opcode == 0x10 then
            dissect_sack(tvb, pinfo, t, psn)
        elseif opcode == 0x11 then
            dissect_nack(tvb, pinfo, t, psn)
        elseif opcode >= 0x30 then
            dissect_cm(tvb, pinfo, t, opcode)
        else
            dissect_probe(tvb, pinfo, t)
        end
    end
    return tvb:len()
end

local current_port = DEFAULT_PORT
DissectorTable.get("udp.port"):add(current_port, mrc)

-- The heuristic: the datagram goes to the MRC port and starts with a base
-- header of version 1 and a known opcode.
local udp_dstport = Field.new("udp.dstport")
local function heuristic(tvb, pinfo, tree)
    local dp = udp_dstport()
    if dp == nil or dp.value ~= current_port or tvb:len() < BASE then return false end
    if tvb(2, 1):uint() ~= 1 or opcodes[tvb(0, 1):uint()] == nil then return false end
    mrc.dissector(tvb, pinfo, tree)
    return true
end
mrc:register_heuristic("udp", heuristic)

function mrc.prefs_changed()
    if prefs.udp_port ~= current_port then
        DissectorTable.get("udp.port"):remove(current_port, mrc)
        current_port = prefs.udp_port
        DissectorTable.get("udp.port"):add(current_port, mrc)
    end
end
