// CRC-32C with the CPU's checksum instruction: SSE4.2 on x86-64, the CRC extension on arm64.
// Each function is compiled for its instruction set alone (a target attribute), so the package
// needs no compiler flags; callers check logsync_crc32c_hardware_available() first.
#include "ccrc32c.h"

#include <string.h>

// The loop both instruction sets run, as the body of their hardware function: eight bytes per
// instruction, then the last few bytes one by one. ACC is the accumulator's type (x86-64's
// 8-byte instruction works on 64 bits), STEP8 and STEP1 the instruction set's 8-byte and 1-byte
// CRC-32C steps.
#define CRC32C_HARDWARE_LOOP(ACC, STEP8, STEP1) \
    const unsigned char *p = bytes;             \
    ACC c = (uint32_t)~crc;                     \
    while (length >= 8) {                       \
        uint64_t word;                          \
        memcpy(&word, p, 8);                    \
        c = STEP8(c, word);                     \
        p += 8;                                 \
        length -= 8;                            \
    }                                           \
    while (length > 0) {                        \
        c = STEP1((uint32_t)c, *p++);           \
        length--;                               \
    }                                           \
    return ~(uint32_t)c;

#if defined(__x86_64__)
#include <nmmintrin.h>

int logsync_crc32c_hardware_available(void) {
    return __builtin_cpu_supports("sse4.2") ? 1 : 0;
}

__attribute__((target("sse4.2")))
uint32_t logsync_crc32c_hardware(uint32_t crc, const void *bytes, size_t length) {
    CRC32C_HARDWARE_LOOP(uint64_t, _mm_crc32_u64, _mm_crc32_u8)
}

#elif defined(__aarch64__)
#include <arm_acle.h>
#if defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_CRC32
#define HWCAP_CRC32 (1 << 7)
#endif
#endif

int logsync_crc32c_hardware_available(void) {
#if defined(__APPLE__)
    return 1;
#elif defined(__linux__)
    return (getauxval(AT_HWCAP) & HWCAP_CRC32) ? 1 : 0;
#else
    return 0;
#endif
}

__attribute__((target("crc")))
uint32_t logsync_crc32c_hardware(uint32_t crc, const void *bytes, size_t length) {
    CRC32C_HARDWARE_LOOP(uint32_t, __crc32cd, __crc32cb)
}

#else

int logsync_crc32c_hardware_available(void) { return 0; }

uint32_t logsync_crc32c_hardware(uint32_t crc, const void *bytes, size_t length) {
    (void)bytes;
    (void)length;
    return crc;
}

#endif
