/* place.h - where run keeps a file it makes from one of the user's files
 * (the prepared weights from the weights, the prepared tokenizer from
 * tokenizer.json): beside that file when its folder is writable, else in
 * the cache folder, $XDG_CACHE_HOME/run (or ~/.cache/run), under a name
 * that begins with a hash of the file's real path (so two checkpoints'
 * files do not meet there). Readers look in both places, beside first. */
#ifndef PLACE_H
#define PLACE_H

/* <the folder of source>/<name>. */
char *place_beside(const char *source, const char *name);

/* <cache folder>/<16 hex digits of the hash of source's real path>-<name>,
 * or NULL when there is no cache folder or source does not exist. */
char *place_cached(const char *source, const char *name);

/* Where to write: place_beside when source's folder is writable, else
 * place_cached (its folders made if need be); NULL when neither can be
 * written. */
char *place_to_write(const char *source, const char *name);

/* $XDG_CACHE_HOME/run, or $HOME/.cache/run; NULL when neither is set (an
 * XDG_CACHE_HOME that is not an absolute path is ignored, as the XDG
 * specification says). */
char *place_cache_folder(void);

/* The folder part of path: "." for a bare name, "/" for a file in /. */
char *place_folder_of(const char *path);

#endif
