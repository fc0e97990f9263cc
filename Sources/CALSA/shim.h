#include <alsa/asoundlib.h>

// ALSA prints its errors to stderr by default; a library must not print. Earshot reports ALSA's
// reasons itself (snd_strerror), so the library's own messages are silenced.
static void earshot_alsa_silent(const char *file, int line, const char *function, int err, const char *fmt, ...) {
    (void)file; (void)line; (void)function; (void)err; (void)fmt;
}

static inline void earshot_alsa_silence_errors(void) {
    snd_lib_error_set_handler(earshot_alsa_silent);
}
