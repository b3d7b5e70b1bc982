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
