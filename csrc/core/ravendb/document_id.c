/* The document id rule (see document_id.h). */
#include "document_id.h"

#include <stdint.h>

#include "json_string.h"

int bw_utf8_all_space(const char *text, size_t n) {
    const unsigned char *s = (const unsigned char *)text;
    size_t i = 0;
    while (i < n) { /* most ids fail on their first byte */
        unsigned char c = s[i];
        if (c < 0x80) {
            if (!((c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20)))
                return 0;
            i += 1;
        } else if (c == 0xc2 && i + 1 < n) { /* U+0085, U+00A0 */
            if (s[i + 1] != 0x85 && s[i + 1] != 0xa0)
                return 0;
            i += 2;
        } else if ((c == 0xe1 || c == 0xe2 || c == 0xe3) && i + 2 < n) {
            uint32_t cp = ((uint32_t)(c & 0x0f) << 12) | ((uint32_t)(s[i + 1] & 0x3f) << 6) |
                          (uint32_t)(s[i + 2] & 0x3f);
            if (!(cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 ||
                  cp == 0x202f || cp == 0x205f || cp == 0x3000))
                return 0;
            i += 3;
        } else {
            return 0;
        }
    }
    return 1;
}

/* The rule, with the encoding judged only when `judge_utf8`. */
static bw_id_problem id_problem(const char *prefix, size_t prefix_len, const char *text,
                                size_t text_len, int judge_utf8) {
    if (prefix_len == 0 && text_len == 0)
        return BW_ID_EMPTY;
    char last = text_len > 0 ? text[text_len - 1] : prefix[prefix_len - 1];
    if (last == '|')
        return BW_ID_ENDS_WITH_PIPE;
    if (judge_utf8 && (!bw_utf8_valid(prefix, prefix_len) || !bw_utf8_valid(text, text_len)))
        return BW_ID_NOT_UTF8;
    if (bw_utf8_all_space(prefix, prefix_len) && bw_utf8_all_space(text, text_len))
        return BW_ID_BLANK;
    return BW_ID_OK;
}

bw_id_problem bw_document_id_check(const char *prefix, size_t prefix_len, const char *text,
                                   size_t text_len) {
    return id_problem(prefix, prefix_len, text, text_len, 1);
}

bw_id_problem bw_document_id_check_valid_utf8(const char *prefix, size_t prefix_len,
                                              const char *text, size_t text_len) {
    return id_problem(prefix, prefix_len, text, text_len, 0);
}

const char *bw_document_id_problem_text(bw_id_problem problem) {
    switch (problem) {
    case BW_ID_OK:
        return "";
    case BW_ID_EMPTY:
        return "is empty";
    case BW_ID_BLANK:
        return "is only whitespace";
    case BW_ID_ENDS_WITH_PIPE:
        return "ends with '|' (the server would generate the id)";
    case BW_ID_NOT_UTF8:
        return "is not valid UTF-8";
    }
    return "is not a document id";
}
