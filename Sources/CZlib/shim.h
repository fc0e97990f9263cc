#include <zlib.h>

/// inflateInit2 is a macro: a raw deflate stream (a zip entry's data, no zlib header).
static inline int earshot_inflate_init_raw(z_stream *stream) {
    return inflateInit2(stream, -MAX_WBITS);
}
