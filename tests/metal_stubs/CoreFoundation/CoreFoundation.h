// Stub of Apple's <CoreFoundation/CoreFoundation.h> for the Linux syntax check of
// src/backend/metal/metal_device.mm (README.md here): only what that file uses, as Apple's SDK
// declares it.
#pragma once
#include <stdint.h>

#define CF_RETURNS_RETAINED __attribute__((cf_returns_retained))
#define CF_CONSUMED __attribute__((cf_consumed))
#define CF_RELEASES_ARGUMENT __attribute__((cf_consumed))

#ifdef __cplusplus
extern "C" {
#endif

typedef unsigned char Boolean;
typedef signed long CFIndex;
typedef unsigned long CFTypeID;
typedef double CFTimeInterval;

typedef const void *CFTypeRef;
typedef const struct __CFString *CFStringRef;
typedef const struct __CFAllocator *CFAllocatorRef;
typedef const struct __CFNumber *CFNumberRef;
typedef const struct __CFDictionary *CFDictionaryRef;
typedef struct __CFDictionary *CFMutableDictionaryRef;

extern const CFAllocatorRef kCFAllocatorDefault;

// CFNumber.h: typedef CF_ENUM(CFIndex, CFNumberType)
enum CFNumberType : CFIndex {
    kCFNumberIntType = 9,
};

CFTypeID CFGetTypeID(CFTypeRef cf);
CFTypeID CFNumberGetTypeID(void);
Boolean CFNumberGetValue(CFNumberRef number, CFNumberType theType, void *valuePtr);
void CFRelease(CFTypeRef cf);

#ifdef __cplusplus
}
#endif

// CFString.h: a compile-time constant CFString.
#define CFSTR(cStr) ((CFStringRef)__builtin___CFStringMakeConstantString("" cStr ""))
