# cython: language_level=3
"""CRC-32 of a 16-byte frame header prefix, as zlib.crc32 computes it (docs/design.md §4).

Slice-by-16: the reflected zlib polynomial 0xEDB88320 expanded into 16 tables of 256
entries, so the 16 lookups for one header are independent instead of zlib's
byte-serial loop for short inputs. The initial ~0 folds into the first four bytes.
crc_ready() fills the tables and checks them against zlib.crc32 (call it once at
import: ImportError on a mismatch); the tables are static, so every module that
cimports this has its own copy.
"""

from libc.stdint cimport uint32_t

cdef extern from *:
    """
    static uint32_t qim_crc_t[16][256];

    static void qim_crc_init(void) {
        for (int i = 0; i < 256; i++) {
            uint32_t c = (uint32_t)i;
            for (int j = 0; j < 8; j++) c = (c >> 1) ^ ((c & 1) ? 0xEDB88320u : 0u);
            qim_crc_t[0][i] = c;
        }
        for (int k = 1; k < 16; k++)
            for (int i = 0; i < 256; i++) {
                uint32_t c = qim_crc_t[k - 1][i];
                qim_crc_t[k][i] = (c >> 8) ^ qim_crc_t[0][c & 0xFF];
            }
    }

    #define QIM_T(k, i) qim_crc_t[k][p[i]]
    static inline uint32_t qim_header_crc(const unsigned char* p) {
        uint32_t c = qim_crc_t[15][p[0] ^ 0xFF] ^ qim_crc_t[14][p[1] ^ 0xFF]
                   ^ qim_crc_t[13][p[2] ^ 0xFF] ^ qim_crc_t[12][p[3] ^ 0xFF];
        c ^= QIM_T(11, 4) ^ QIM_T(10, 5) ^ QIM_T(9, 6) ^ QIM_T(8, 7);
        c ^= QIM_T(7, 8) ^ QIM_T(6, 9) ^ QIM_T(5, 10) ^ QIM_T(4, 11);
        c ^= QIM_T(3, 12) ^ QIM_T(2, 13) ^ QIM_T(1, 14) ^ QIM_T(0, 15);
        return ~c;
    }
    #undef QIM_T
    """
    void qim_crc_init() noexcept nogil
    uint32_t qim_header_crc(const unsigned char* p) noexcept nogil


cdef inline int crc_ready() except -1:
    """Fill the tables, then prove qim_header_crc equals zlib.crc32 on 64 probes."""
    import zlib
    cdef bytes probe
    qim_crc_init()
    for seed in range(64):
        probe = bytes([(seed * 37 + i * 101) & 0xFF for i in range(16)])
        if qim_header_crc(<const unsigned char*>probe) != zlib.crc32(probe):
            raise ImportError("qim._core: header CRC table disagrees with zlib.crc32")
    return 0
