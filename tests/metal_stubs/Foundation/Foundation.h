// Stub of Apple's <Foundation/Foundation.h> for the Linux syntax check of
// src/backend/metal/metal_device.mm (README.md here): only what that file uses, with Apple's
// names, types and selectors, so that a misspelled or mistyped use fails to compile.
#pragma once
#include <CoreFoundation/CoreFoundation.h>
#include <stddef.h>
#include <stdint.h>

// <objc/objc.h>, <objc/NSObjCRuntime.h> (arm64: BOOL is bool)
typedef bool BOOL;
#define YES __objc_yes
#define NO __objc_no
#define nil nullptr
typedef long NSInteger;
typedef unsigned long NSUInteger;

// Clang predefines this spelling on Apple targets only (the Metal headers use it).
#define __nullable _Nullable

#define API_AVAILABLE(...)
#define API_DEPRECATED(...)
#define NS_RETURNS_RETAINED __attribute__((ns_returns_retained))
#define NS_RETURNS_INNER_POINTER __attribute__((objc_returns_inner_pointer))
#define NS_ASSUME_NONNULL_BEGIN _Pragma("clang assume_nonnull begin")
#define NS_ASSUME_NONNULL_END _Pragma("clang assume_nonnull end")

NS_ASSUME_NONNULL_BEGIN

@protocol NSObject
@end

__attribute__((objc_root_class))
@interface NSObject <NSObject>
+ (instancetype)new;
@end

@interface NSString : NSObject
+ (nullable instancetype)stringWithUTF8String:(const char *)nullTerminatedCString;
@property (nullable, readonly) const char *UTF8String NS_RETURNS_INNER_POINTER;
@end

@interface NSError : NSObject
@property (readonly, copy) NSString *localizedDescription;
@end

@interface NSURL : NSObject
+ (NSURL *)fileURLWithPath:(NSString *)path;
@end

// <Foundation/NSObject.h>: hands a +1 Core Foundation reference over to ARC.
static inline __attribute__((always_inline)) id _Nullable CFBridgingRelease(CFTypeRef CF_CONSUMED _Nullable X) {
    return (__bridge_transfer id)X;
}

NS_ASSUME_NONNULL_END
