#include "wire/addr.h"

#include <cstdio>

namespace mrc::wire {

namespace {

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

}  // namespace

std::optional<uint32_t> parse_ipv4(std::string_view s) {
    uint32_t ip = 0;
    size_t i = 0;
    for (int part = 0; part < 4; ++part) {
        if (part > 0) {
            if (i >= s.size() || s[i] != '.') return std::nullopt;
            ++i;
        }
        uint32_t v = 0;
        size_t digits = 0;
        while (i < s.size() && s[i] >= '0' && s[i] <= '9' && digits < 4) {
            v = v * 10 + uint32_t(s[i] - '0');
            ++i;
            ++digits;
        }
        if (digits == 0 || digits > 3 || v > 255) return std::nullopt;
        ip = ip << 8 | v;
    }
    if (i != s.size()) return std::nullopt;
    return ip;
}

std::string ipv4_string(uint32_t ip) {
    char b[16];
    std::snprintf(b, sizeof b, "%u.%u.%u.%u", ip >> 24, (ip >> 16) & 255, (ip >> 8) & 255,
                  ip & 255);
    return b;
}

std::optional<Ipv6Addr> parse_ipv6(std::string_view s) {
    uint16_t head[8], tail[8];
    size_t nhead = 0, ntail = 0;
    bool gap = false;  // "::" seen: groups from here on go to the tail
    size_t i = 0;
    if (s.size() >= 2 && s[0] == ':' && s[1] == ':') {
        gap = true;
        i = 2;
    } else if (!s.empty() && s[0] == ':') {
        return std::nullopt;
    }
    while (i < s.size()) {
        // An embedded IPv4 address ends the text.
        const size_t next_colon = s.find(':', i);
        const std::string_view rest = s.substr(
            i, next_colon == std::string_view::npos ? std::string_view::npos : next_colon - i);
        if (rest.find('.') != std::string_view::npos) {
            if (next_colon != std::string_view::npos) return std::nullopt;
            const auto v4 = parse_ipv4(rest);
            if (!v4 || nhead + ntail + 2 > 8) return std::nullopt;
            uint16_t *g = gap ? tail : head;
            size_t &n = gap ? ntail : nhead;
            g[n++] = static_cast<uint16_t>(*v4 >> 16);
            g[n++] = static_cast<uint16_t>(*v4);
            i = s.size();
            break;
        }
        uint32_t v = 0;
        size_t digits = 0;
        while (i < s.size() && hex_digit(s[i]) >= 0) {
            if (++digits > 4) return std::nullopt;
            v = v * 16 + uint32_t(hex_digit(s[i]));
            ++i;
        }
        if (digits == 0) return std::nullopt;
        if (nhead + ntail == 8) return std::nullopt;
        (gap ? tail[ntail++] : head[nhead++]) = static_cast<uint16_t>(v);
        if (i == s.size()) break;
        if (s[i] != ':') return std::nullopt;
        ++i;
        if (i < s.size() && s[i] == ':') {
            if (gap) return std::nullopt;  // a second "::"
            gap = true;
            ++i;
        } else if (i == s.size()) {
            return std::nullopt;  // a trailing single ':'
        }
    }
    const size_t groups = nhead + ntail;
    if (gap ? groups > 7 : groups != 8) return std::nullopt;
    Ipv6Addr a{};
    uint16_t all[8] = {};
    for (size_t k = 0; k < nhead; ++k)
        all[k] = head[k];
    for (size_t k = 0; k < ntail; ++k)
        all[8 - ntail + k] = tail[k];
    for (size_t k = 0; k < 8; ++k) {
        a.b[2 * k] = static_cast<uint8_t>(all[k] >> 8);
        a.b[2 * k + 1] = static_cast<uint8_t>(all[k]);
    }
    return a;
}

std::string ipv6_string(const Ipv6Addr &a) {
    uint16_t g[8];
    for (size_t k = 0; k < 8; ++k)
        g[k] = static_cast<uint16_t>(a.b[2 * k] << 8 | a.b[2 * k + 1]);
    // The longest run of zero groups, two at least; the first of equal ones.
    size_t best = 8, best_len = 1;
    for (size_t k = 0; k < 8;) {
        if (g[k] != 0) {
            ++k;
            continue;
        }
        size_t e = k;
        while (e < 8 && g[e] == 0)
            ++e;
        if (e - k > best_len) {
            best = k;
            best_len = e - k;
        }
        k = e;
    }
    std::string out;
    char b[8];
    for (size_t k = 0; k < 8; ++k) {
        if (k == best) {
            out += "::";
            k += best_len - 1;
            continue;
        }
        if (!out.empty() && out.back() != ':') out += ':';
        std::snprintf(b, sizeof b, "%x", unsigned(g[k]));
        out += b;
    }
    return out;
}

std::optional<MacAddr> parse_mac(std::string_view s) {
    MacAddr m{};
    size_t i = 0;
    for (int part = 0; part < 6; ++part) {
        if (part > 0) {
            if (i >= s.size() || s[i] != ':') return std::nullopt;
            ++i;
        }
        int v = 0;
        size_t digits = 0;
        while (i < s.size() && hex_digit(s[i]) >= 0 && digits < 3) {
            v = v * 16 + hex_digit(s[i]);
            ++i;
            ++digits;
        }
        if (digits == 0 || digits > 2) return std::nullopt;
        m.b[part] = uint8_t(v);
    }
    if (i != s.size()) return std::nullopt;
    return m;
}

std::string mac_string(const MacAddr &m) {
    char b[18];
    std::snprintf(b, sizeof b, "%02x:%02x:%02x:%02x:%02x:%02x", m.b[0], m.b[1], m.b[2], m.b[3],
                  m.b[4], m.b[5]);
    return b;
}

}  // namespace mrc::wire
