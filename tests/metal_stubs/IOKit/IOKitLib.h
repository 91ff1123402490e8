// Stub of Apple's <IOKit/IOKitLib.h> for the Linux syntax check of
// src/backend/metal/metal_device.mm (README.md here): only what that file uses, as Apple's SDK
// declares it.
#pragma once
#include <CoreFoundation/CoreFoundation.h>
#include <stdint.h>

// <mach/port.h>, <mach/kern_return.h>, <IOKit/IOTypes.h>
typedef unsigned int mach_port_t;  // __darwin_mach_port_t
#define MACH_PORT_NULL 0
typedef int kern_return_t;
typedef uint32_t IOOptionBits;
typedef mach_port_t io_object_t;
typedef io_object_t io_registry_entry_t;
typedef io_object_t io_service_t;
#define IO_OBJECT_NULL ((io_object_t)0)

#ifdef __cplusplus
extern "C" {
#endif

kern_return_t IOObjectRelease(io_object_t object);
io_service_t IOServiceGetMatchingService(mach_port_t mainPort, CFDictionaryRef matching CF_RELEASES_ARGUMENT);
CFMutableDictionaryRef IOServiceMatching(const char *name) CF_RETURNS_RETAINED;
CFTypeRef IORegistryEntryCreateCFProperty(io_registry_entry_t entry, CFStringRef key, CFAllocatorRef allocator,
                                          IOOptionBits options) CF_RETURNS_RETAINED;

#ifdef __cplusplus
}
#endif
