/* The document id rule: each problem, an id split anywhere between prefix and text judged
   as the whole id, the order in which problems are found, and the problems' words.
   sources: document_id.c json_string.c out_buffer.c */
#include <string.h>

#include "check.h"
#include "document_id.h"

/* The verdict on the whole id, and on every split of it into prefix + text between two
   characters (a prefix is a whole text): all the same. */
static bw_id_problem verdict(const char *id, size_t n) {
    bw_id_problem whole = bw_document_id_check(NULL, 0, id, n);
    for (size_t cut = 0; cut <= n; cut++) {
        if (cut < n && ((unsigned char)id[cut] & 0xc0) == 0x80)
            continue; /* inside a character */
        if (bw_document_id_check(id, cut, id + cut, n - cut) != whole) {
            fprintf(stderr, "split at %zu of \"%.*s\" judged otherwise\n", cut, (int)n, id);
            return (bw_id_problem)-1;
        }
    }
    return whole;
}

#define V(lit) verdict(lit, sizeof lit - 1)

TEST(each_problem) {
    CHECK_EQ(verdict("", 0), BW_ID_EMPTY);
    CHECK_EQ(V("users/1"), BW_ID_OK);
    CHECK_EQ(V("users|"), BW_ID_ENDS_WITH_PIPE);
    CHECK_EQ(V("|users"), BW_ID_OK);
    CHECK_EQ(V("|"), BW_ID_ENDS_WITH_PIPE);
    CHECK_EQ(V(" "), BW_ID_BLANK);
    CHECK_EQ(V(" \t\n\v\f\r\x1c\x1d\x1e\x1f"), BW_ID_BLANK);
    CHECK_EQ(V("\xc2\x85\xc2\xa0\xe1\x9a\x80\xe2\x80\x80\xe2\x80\x8a\xe2\x80\xa8\xe2\x80\xa9"
               "\xe2\x80\xaf\xe2\x81\x9f\xe3\x80\x80"), BW_ID_BLANK);
    CHECK_EQ(V(" a "), BW_ID_OK);
    CHECK_EQ(V("\xe2\x80\x8b"), BW_ID_OK); /* U+200B is not whitespace to str.isspace */
    CHECK_EQ(V("a\xff"), BW_ID_NOT_UTF8);
    CHECK_EQ(V("\xed\xa0\x80"), BW_ID_NOT_UTF8); /* a surrogate */
    CHECK_EQ(V("\xc2"), BW_ID_NOT_UTF8);         /* cut short */
}

TEST(problems_are_found_in_order) {
    CHECK_EQ(V("\xff|"), BW_ID_ENDS_WITH_PIPE); /* '|' before UTF-8 */
    CHECK_EQ(V(" \xff"), BW_ID_NOT_UTF8);       /* UTF-8 before whitespace */
    CHECK_EQ(V(" |"), BW_ID_ENDS_WITH_PIPE);
}

TEST(a_prefix_and_a_text_are_one_id) {
    CHECK_EQ(bw_document_id_check("users|", 6, NULL, 0), BW_ID_ENDS_WITH_PIPE);
    CHECK_EQ(bw_document_id_check("users|", 6, "1", 1), BW_ID_OK);
    CHECK_EQ(bw_document_id_check(" ", 1, NULL, 0), BW_ID_BLANK);
    CHECK_EQ(bw_document_id_check(" ", 1, "a", 1), BW_ID_OK);
    CHECK_EQ(bw_document_id_check("a", 1, " ", 1), BW_ID_OK);
    CHECK_EQ(bw_document_id_check("\xff", 1, "a", 1), BW_ID_NOT_UTF8);
}

/* On valid UTF-8 the check that skips judging the encoding gives the full check's verdict,
   for every id of the tests above that is valid UTF-8, whole and split. */
TEST(valid_utf8_is_judged_alike_without_the_encoding_check) {
    static const char *const ids[] = {
        "", "users/1", "users|", "|users", "|", " ", " \t\n\v\f\r\x1c\x1d\x1e\x1f",
        "\xc2\x85\xc2\xa0\xe1\x9a\x80\xe2\x80\x80\xe3\x80\x80", " a ", "\xe2\x80\x8b", " |",
        "a|b", "\xe2\x80\xa8|"};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        const char *id = ids[i];
        size_t n = strlen(id);
        for (size_t cut = 0; cut <= n; cut++) {
            if (cut < n && ((unsigned char)id[cut] & 0xc0) == 0x80)
                continue;
            CHECK_EQ(bw_document_id_check_valid_utf8(id, cut, id + cut, n - cut),
                     bw_document_id_check(id, cut, id + cut, n - cut));
        }
    }
}

TEST(the_words_of_each_problem) {
    CHECK(strcmp(bw_document_id_problem_text(BW_ID_OK), "") == 0);
    CHECK(strcmp(bw_document_id_problem_text(BW_ID_EMPTY), "is empty") == 0);
    CHECK(strcmp(bw_document_id_problem_text(BW_ID_BLANK), "is only whitespace") == 0);
    CHECK(strcmp(bw_document_id_problem_text(BW_ID_ENDS_WITH_PIPE),
                 "ends with '|' (the server would generate the id)") == 0);
    CHECK(strcmp(bw_document_id_problem_text(BW_ID_NOT_UTF8), "is not valid UTF-8") == 0);
}

RUN_TESTS(each_problem, problems_are_found_in_order, a_prefix_and_a_text_are_one_id,
          valid_utf8_is_judged_alike_without_the_encoding_check, the_words_of_each_problem)
