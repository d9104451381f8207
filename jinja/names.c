/* jinja/names.c - the names the engine knows: every jinja2 filter and
 * test (those it does not have marked as such), and the methods of str,
 * dict, list and loop with the types that have them. */
#include "jinja.h"

/* ======================================================================
 * Names of filters, tests and methods
 * ====================================================================== */

static const struct {
    const char *name;
    FilterId id;
} filters[] = {
    {"abs", FI_ABS},
    {"attr", FI_ATTR},
    {"batch", FI_BATCH},
    {"capitalize", FI_CAPITALIZE},
    {"center", FI_CENTER},
    {"count", FI_LENGTH},
    {"d", FI_DEFAULT},
    {"default", FI_DEFAULT},
    {"dictsort", FI_DICTSORT},
    {"e", FI_ESCAPE},
    {"escape", FI_ESCAPE},
    {"first", FI_FIRST},
    {"float", FI_FLOAT},
    {"format", FI_FORMAT},
    {"indent", FI_INDENT},
    {"int", FI_INT},
    {"items", FI_ITEMS},
    {"join", FI_JOIN},
    {"last", FI_LAST},
    {"length", FI_LENGTH},
    {"list", FI_LIST},
    {"lower", FI_LOWER},
    {"map", FI_MAP},
    {"max", FI_MAX},
    {"min", FI_MIN},
    {"reject", FI_REJECT},
    {"rejectattr", FI_REJECTATTR},
    {"replace", FI_REPLACE},
    {"reverse", FI_REVERSE},
    {"round", FI_ROUND},
    {"safe", FI_SAFE},
    {"select", FI_SELECT},
    {"selectattr", FI_SELECTATTR},
    {"slice", FI_SLICE},
    {"sort", FI_SORT},
    {"string", FI_STRING},
    {"sum", FI_SUM},
    {"title", FI_TITLE},
    {"tojson", FI_TOJSON},
    {"trim", FI_TRIM},
    {"truncate", FI_TRUNCATE},
    {"unique", FI_UNIQUE},
    {"upper", FI_UPPER},
    {"wordcount", FI_WORDCOUNT},
    {"filesizeformat", FI_UNSUPPORTED},
    {"forceescape", FI_UNSUPPORTED},
    {"groupby", FI_UNSUPPORTED},
    {"pprint", FI_UNSUPPORTED},
    {"random", FI_UNSUPPORTED},
    {"striptags", FI_UNSUPPORTED},
    {"urlencode", FI_UNSUPPORTED},
    {"urlize", FI_UNSUPPORTED},
    {"wordwrap", FI_UNSUPPORTED},
    {"xmlattr", FI_UNSUPPORTED},
};

static const struct {
    const char *name;
    TestId id;
} tests[] = {
    {"boolean", TE_BOOLEAN},
    {"callable", TE_CALLABLE},
    {"defined", TE_DEFINED},
    {"divisibleby", TE_DIVISIBLEBY},
    {"==", TE_EQ},
    {"eq", TE_EQ},
    {"equalto", TE_EQ},
    {"escaped", TE_ESCAPED},
    {"even", TE_EVEN},
    {"false", TE_FALSE},
    {"filter", TE_FILTER},
    {"float", TE_FLOAT},
    {">=", TE_GE},
    {"ge", TE_GE},
    {">", TE_GT},
    {"gt", TE_GT},
    {"greaterthan", TE_GT},
    {"in", TE_IN},
    {"integer", TE_INTEGER},
    {"iterable", TE_ITERABLE},
    {"<=", TE_LE},
    {"le", TE_LE},
    {"lower", TE_LOWER},
    {"<", TE_LT},
    {"lt", TE_LT},
    {"lessthan", TE_LT},
    {"mapping", TE_MAPPING},
    {"!=", TE_NE},
    {"ne", TE_NE},
    {"none", TE_NONE},
    {"number", TE_NUMBER},
    {"odd", TE_ODD},
    {"sameas", TE_SAMEAS},
    {"sequence", TE_SEQUENCE},
    {"string", TE_STRING},
    {"test", TE_TEST},
    {"true", TE_TRUE},
    {"undefined", TE_UNDEFINED},
    {"upper", TE_UPPER},
};

int find_filter(Str name) {
    for (size_t i = 0; i < sizeof filters / sizeof filters[0]; i++)
        if (str_is(name, filters[i].name)) return (int)filters[i].id;
    return -1;
}

/* A filter's name (the first of its names), for messages. */
const char *filter_name(FilterId id) {
    for (size_t i = 0; i < sizeof filters / sizeof filters[0]; i++)
        if (filters[i].id == id) return filters[i].name;
    return "filter";
}

int find_test(Str name) {
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++)
        if (str_is(name, tests[i].name)) return (int)tests[i].id;
    return -1;
}

const MethodInfo methods[] = {
    [M_CAPITALIZE] = {"capitalize", ON_STR, 0, false},
    [M_CASEFOLD] = {"casefold", ON_STR, 0, false},
    [M_CENTER] = {"center", ON_STR, 0, false},
    [M_COUNT] = {"count", ON_STR | ON_LIST | ON_TUPLE, 0, false},
    [M_ENDSWITH] = {"endswith", ON_STR, 0, false},
    [M_FIND] = {"find", ON_STR, 0, false},
    [M_FORMAT] = {"format", ON_STR, 0, false},
    [M_INDEX] = {"index", ON_STR | ON_LIST | ON_TUPLE, 0, false},
    [M_ISALNUM] = {"isalnum", ON_STR, 0, false},
    [M_ISALPHA] = {"isalpha", ON_STR, 0, false},
    [M_ISDECIMAL] = {"isdecimal", ON_STR, 0, false},
    [M_ISDIGIT] = {"isdigit", ON_STR, 0, false},
    [M_ISLOWER] = {"islower", ON_STR, 0, false},
    [M_ISNUMERIC] = {"isnumeric", ON_STR, 0, false},
    [M_ISSPACE] = {"isspace", ON_STR, 0, false},
    [M_ISTITLE] = {"istitle", ON_STR, 0, false},
    [M_ISUPPER] = {"isupper", ON_STR, 0, false},
    [M_JOIN] = {"join", ON_STR, 0, false},
    [M_LJUST] = {"ljust", ON_STR, 0, false},
    [M_LOWER] = {"lower", ON_STR, 0, false},
    [M_LSTRIP] = {"lstrip", ON_STR, 0, false},
    [M_PARTITION] = {"partition", ON_STR, 0, false},
    [M_REMOVEPREFIX] = {"removeprefix", ON_STR, 0, false},
    [M_REMOVESUFFIX] = {"removesuffix", ON_STR, 0, false},
    [M_REPLACE] = {"replace", ON_STR, 0, false},
    [M_RFIND] = {"rfind", ON_STR, 0, false},
    [M_RINDEX] = {"rindex", ON_STR, 0, false},
    [M_RJUST] = {"rjust", ON_STR, 0, false},
    [M_RPARTITION] = {"rpartition", ON_STR, 0, false},
    [M_RSPLIT] = {"rsplit", ON_STR, 0, false},
    [M_RSTRIP] = {"rstrip", ON_STR, 0, false},
    [M_SPLIT] = {"split", ON_STR, 0, false},
    [M_SPLITLINES] = {"splitlines", ON_STR, 0, false},
    [M_STARTSWITH] = {"startswith", ON_STR, 0, false},
    [M_STRIP] = {"strip", ON_STR, 0, false},
    [M_SWAPCASE] = {"swapcase", ON_STR, 0, false},
    [M_TITLE] = {"title", ON_STR, 0, false},
    [M_UPPER] = {"upper", ON_STR, 0, false},
    [M_ZFILL] = {"zfill", ON_STR, 0, false},
    [M_ENCODE] = {"encode", ON_STR, 0, true},
    [M_EXPANDTABS] = {"expandtabs", ON_STR, 0, true},
    [M_FORMAT_MAP] = {"format_map", ON_STR, 0, true},
    [M_ISASCII] = {"isascii", ON_STR, 0, true},
    [M_ISIDENTIFIER] = {"isidentifier", ON_STR, 0, true},
    [M_ISPRINTABLE] = {"isprintable", ON_STR, 0, true},
    [M_MAKETRANS] = {"maketrans", ON_STR, 0, true},
    [M_TRANSLATE] = {"translate", ON_STR, 0, true},
    [M_GET] = {"get", ON_DICT, 0, false},
    [M_ITEMS] = {"items", ON_DICT, 0, false},
    [M_KEYS] = {"keys", ON_DICT, 0, false},
    [M_VALUES] = {"values", ON_DICT, 0, false},
    [M_COPY] = {"copy", ON_DICT | ON_LIST, 0, false},
    [M_FROMKEYS] = {"fromkeys", ON_DICT, 0, true},
    [M_CLEAR] = {"clear", ON_DICT | ON_LIST, ON_DICT, false},
    [M_POP] = {"pop", ON_DICT | ON_LIST, ON_DICT, false},
    [M_POPITEM] = {"popitem", ON_DICT, ON_DICT, false},
    [M_SETDEFAULT] = {"setdefault", ON_DICT, ON_DICT, false},
    [M_UPDATE] = {"update", ON_DICT, ON_DICT, false},
    [M_APPEND] = {"append", ON_LIST, ON_LIST, false},
    [M_EXTEND] = {"extend", ON_LIST, ON_LIST, false},
    [M_INSERT] = {"insert", ON_LIST, ON_LIST, false},
    [M_REMOVE] = {"remove", ON_LIST, ON_LIST, false},
    [M_REVERSE] = {"reverse", ON_LIST, ON_LIST, false},
    [M_SORT] = {"sort", ON_LIST, ON_LIST, false},
    [M_CYCLE] = {"cycle", ON_LOOP, 0, false},
    [M_CHANGED] = {"changed", ON_LOOP, 0, false},
};

int find_method(Str name) {
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (str_is(name, methods[i].name)) return (int)i;
    return -1;
}

const char *method_name(int id) { return methods[id].name; }
