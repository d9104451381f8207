/* place.c - the two places of a file run makes from a user's file. */
#include "place.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

char *place_folder_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return xstrdup(".");
    if (slash == path) return xstrdup("/");
    char *dir = xstrdup(path);
    dir[slash - path] = '\0';
    return dir;
}

char *place_beside(const char *source, const char *name) {
    char *dir = place_folder_of(source), *path = path_join(dir, name);
    free(dir);
    return path;
}

char *place_cache_folder(void) {
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && xdg[0] == '/') return path_join(xdg, "run");
    if (!home || !home[0]) return NULL;
    char *cache = path_join(home, ".cache"), *dir = path_join(cache, "run");
    free(cache);
    return dir;
}

char *place_cached(const char *source, const char *name) {
    char *dir = place_cache_folder(), *real = realpath(source, NULL);
    if (!dir || !real) {
        free(dir);
        free(real);
        return NULL;
    }
    size_t n = strlen(dir) + strlen(name) + 24;
    char *path = xmalloc(n);
    snprintf(path, n, "%s/%016llx-%s", dir, (unsigned long long)mix64_bytes(0, real, strlen(real)), name);
    free(dir);
    free(real);
    return path;
}

/* Creates the folder and its parent (the cache folder's .cache). */
static void make_folders(const char *dir) {
    char *parent = place_folder_of(dir);
    mkdir(parent, 0755);
    mkdir(dir, 0755);
    free(parent);
}

char *place_to_write(const char *source, const char *name) {
    char *dir = place_folder_of(source);
    bool beside = access(dir, W_OK) == 0;
    free(dir);
    if (beside) return place_beside(source, name);
    char *path = place_cached(source, name);
    if (!path) return NULL;
    dir = place_folder_of(path);
    make_folders(dir);
    bool ok = access(dir, W_OK) == 0;
    free(dir);
    if (!ok) free(path);
    return ok ? path : NULL;
}
