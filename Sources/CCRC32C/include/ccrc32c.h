#ifndef LOGSYNC_CCRC32C_H
#define LOGSYNC_CCRC32C_H

#include <stddef.h>
#include <stdint.h>

/// 1 if this CPU has a CRC-32C instruction that logsync_crc32c_hardware uses, else 0.
int logsync_crc32c_hardware_available(void);

/// Continues the CRC-32C `crc` (0 to start; inverted on entry and exit, like the table version)
/// over `length` bytes. Call only when logsync_crc32c_hardware_available() returned 1.
uint32_t logsync_crc32c_hardware(uint32_t crc, const void *bytes, size_t length);

#endif
