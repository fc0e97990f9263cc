// AMX's tile configuration as the kernels use it: palette 1, tiles 0-7 each 16 rows of 64 bytes
// (16 fp32 accumulators a row, or 32 bf16 / 64 int8 values).
#pragma once
#include <stdint.h>
#include <string.h>

struct amx_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
};

// Loads the configuration on the calling thread (until __builtin_ia32_tilerelease).
__attribute__((target("amx-tile"))) static inline void amx_configure_tiles(void) {
    struct amx_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) {
        cfg.colsb[t] = 64;
        cfg.rows[t] = 16;
    }
    __builtin_ia32_tile_loadconfig(&cfg);
}
