// RE2 for the reader threads: the same engine google-re2 wraps for Python, linked
// from the system's libre2, so a regex is matched without the GIL. The options are
// those of tools.regex.compile_pattern (no captures, UTF-8; literal when asked).
#include <re2/re2.h>

#include <cstddef>
#include <cstdio>
#include <string>

extern "C" {

void *bastion_regex_compile(const char *pattern, size_t len, int literal, char *error,
                            size_t error_len) {
    RE2::Options options;
    options.set_never_capture(true);
    options.set_log_errors(false);
    options.set_literal(literal != 0);
    RE2 *re = new (std::nothrow) RE2(re2::StringPiece(pattern, len), options);
    if (re == nullptr) {
        snprintf(error, error_len, "out of memory");
        return nullptr;
    }
    if (!re->ok()) {
        snprintf(error, error_len, "%s", re->error().c_str());
        delete re;
        return nullptr;
    }
    return re;
}

// The first match in [pos, end) of buf (which is all context, as for the Python
// wrapper's Match(anchor, text, pos, endpos)): 1 with its span, or 0.
int bastion_regex_find(const void *handle, const char *buf, size_t size, size_t pos, size_t end,
                       size_t *first, size_t *last) {
    const RE2 *re = static_cast<const RE2 *>(handle);
    re2::StringPiece text(buf, size), match;
    if (!re->Match(text, pos, end, RE2::UNANCHORED, &match, 1))
        return 0;
    *first = static_cast<size_t>(match.data() - buf);
    *last = *first + match.size();
    return 1;
}

void bastion_regex_free(void *handle) { delete static_cast<RE2 *>(handle); }
}
