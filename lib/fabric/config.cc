#include "fabric/config.h"

#include <toml++/toml.h>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace mrc::fabric {

namespace {

// A TOML value as the text a flag would carry, so one parser checks both.
Result<std::string> as_text(const toml::node &n, const std::string &where) {
    if (auto v = n.as_boolean()) return std::string(v->get() ? "true" : "false");
    if (auto v = n.as_integer()) return std::to_string(v->get());
    if (auto v = n.as_floating_point()) {
        char buf[40];
        std::snprintf(buf, sizeof buf, "%.17g", v->get());
        return std::string(buf);
    }
    if (auto v = n.as_string()) {
        // Values travel as "key=value,..." text: these would split them.
        if (v->get().find_first_of(",=") != std::string::npos)
            return Error{where + ": '" + v->get() + "' may not contain ',' or '='"};
        return v->get();
    }
    return Error{where + ": expected a number, a boolean or a string"};
}

Result<std::vector<std::pair<std::string, std::string>>> table_items(const toml::table &t,
                                                                     const std::string &where) {
    std::vector<std::pair<std::string, std::string>> kv;
    for (const auto &[k, v] : t) {
        const std::string key(k.str());
        auto text = as_text(v, where + ", key '" + key + "'");
        if (!text) return text.error();
        kv.emplace_back(key, *text);
    }
    return kv;
}

std::string join(const std::vector<std::pair<std::string, std::string>> &kv) {
    std::string s;
    for (const auto &[k, v] : kv) {
        if (!s.empty()) s += ',';
        s += k + "=" + v;
    }
    return s;
}

Result<uint64_t> whole(const toml::node &n, const std::string &where, uint64_t lo, uint64_t hi) {
    const auto *v = n.as_integer();
    if (v == nullptr || v->get() < int64_t(lo) || uint64_t(v->get()) > hi)
        return Error{where + ": expected a whole number in [" + std::to_string(lo) + ", " +
                     std::to_string(hi) + "]"};
    return uint64_t(v->get());
}

}  // namespace

Result<FabricConfig> parse_config(const std::string &text, const std::string &name,
                                  FabricConfig base) {
    toml::table root;
    try {
        root = toml::parse(text, name);
    } catch (const toml::parse_error &e) {
        std::ostringstream os;
        os << name << ":" << e.source().begin.line << ":" << e.source().begin.column << ": "
           << e.description();
        return Error{os.str()};
    }
    FabricConfig c = std::move(base);
    for (const auto &[k, v] : root) {
        const std::string key(k.str());
        const std::string where = name + ": '" + key + "'";
        if (key == "paths") {
            auto n = whole(v, where, 1, kMaxPaths);
            if (!n) return n.error();
            c.paths = uint32_t(*n);
        } else if (key == "seed") {
            auto n = whole(v, where, 0, uint64_t(INT64_MAX));
            if (!n) return n.error();
            c.seed = *n;
        } else if (key == "mrc_port") {
            auto n = whole(v, where, 1, 65535);
            if (!n) return n.error();
            c.mrc_port = uint16_t(*n);
        } else if (key == "delay_slots") {
            auto n = whole(v, where, 1, 1u << 20);
            if (!n) return n.error();
            c.delay_slots = uint32_t(*n);
        } else if (key == "impair" || key == "schedule") {
            const auto *arr = v.as_array();
            if (arr == nullptr) return Error{where + ": expected [[" + key + "]] tables"};
            size_t i = 0;
            for (const auto &item : *arr) {
                ++i;
                const std::string w = name + ": " + key + " #" + std::to_string(i);
                const auto *t = item.as_table();
                if (t == nullptr) return Error{w + ": expected a table"};
                auto kv = table_items(*t, w);
                if (!kv) return kv.error();
                if (key == "impair") {
                    auto s = parse_setting(join(*kv));
                    if (!s) return Error{w + ": " + s.error().message};
                    c.settings.push_back(std::move(*s));
                } else {
                    auto e = parse_event(join(*kv));
                    if (!e) return Error{w + ": " + e.error().message};
                    c.schedule.push_back(std::move(*e));
                }
            }
        } else {
            return Error{where +
                         ": unknown key (known: paths, seed, mrc_port, delay_slots, "
                         "[[impair]], [[schedule]])"};
        }
    }
    return c;
}

Result<FabricConfig> load_config(const std::string &path, FabricConfig base) {
    std::ifstream in(path);
    if (!in) return Error{path + ": cannot be read"};
    std::stringstream ss;
    ss << in.rdbuf();
    return parse_config(ss.str(), path, std::move(base));
}

}  // namespace mrc::fabric
