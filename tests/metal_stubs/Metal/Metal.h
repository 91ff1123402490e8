// Stub of Apple's <Metal/Metal.h> for the Linux syntax check of src/backend/metal/metal_device.mm
// (README.md here): only the types, constants and methods that file uses, each declared as in
// Apple's SDK headers (named after each block), so that a misspelled selector, a wrong argument
// type or a constant that does not exist fails to compile.
#pragma once
#import <Foundation/Foundation.h>

NS_ASSUME_NONNULL_BEGIN

@protocol MTLDevice;
@protocol MTLBuffer;
@protocol MTLFunction;
@protocol MTLLibrary;
@protocol MTLComputePipelineState;
@protocol MTLCommandQueue;
@protocol MTLCommandBuffer;
@protocol MTLComputeCommandEncoder;

// --- MTLTypes.h ----------------------------------------------------------------------------------
typedef struct {
    NSUInteger width, height, depth;
} MTLSize;

static inline MTLSize MTLSizeMake(NSUInteger width, NSUInteger height, NSUInteger depth) {
    MTLSize size = {width, height, depth};
    return size;
}

// --- MTLResource.h -------------------------------------------------------------------------------
// typedef NS_OPTIONS(NSUInteger, MTLResourceOptions), as Objective-C++ sees it.
typedef NSUInteger MTLResourceOptions;
enum : NSUInteger {
    MTLResourceStorageModeShared = 0 << 4,  // MTLStorageModeShared << MTLResourceStorageModeShift
};

@protocol MTLResource <NSObject>
@end

// --- MTLBuffer.h ---------------------------------------------------------------------------------
@protocol MTLBuffer <MTLResource>
- (void *)contents NS_RETURNS_INNER_POINTER;
@end

// --- MTLLibrary.h --------------------------------------------------------------------------------
enum MTLLanguageVersion : NSUInteger {
    MTLLanguageVersion3_0 API_AVAILABLE(macos(13.0), ios(16.0)) = (3 << 16) + 0,
};

@interface MTLCompileOptions : NSObject
@property (readwrite, nonatomic) BOOL fastMathEnabled API_DEPRECATED("Use mathMode instead", macos(10.11, 15.0), ios(8.0, 18.0));
@property (readwrite, nonatomic) MTLLanguageVersion languageVersion API_AVAILABLE(macos(10.11), ios(9.0));
@end

@protocol MTLFunction <NSObject>
@end

@protocol MTLLibrary <NSObject>
- (nullable id<MTLFunction>)newFunctionWithName:(NSString *)functionName;
@end

// --- MTLComputePipeline.h ------------------------------------------------------------------------
@protocol MTLComputePipelineState <NSObject>
@property (readonly) NSUInteger maxTotalThreadsPerThreadgroup;
@property (readonly) NSUInteger threadExecutionWidth;
@end

// --- MTLCommandEncoder.h, MTLComputeCommandEncoder.h ---------------------------------------------
@protocol MTLCommandEncoder <NSObject>
- (void)endEncoding;
@end

@protocol MTLComputeCommandEncoder <MTLCommandEncoder>
- (void)setComputePipelineState:(id<MTLComputePipelineState>)state;
- (void)setBytes:(const void *)bytes length:(NSUInteger)length atIndex:(NSUInteger)index API_AVAILABLE(macos(10.11), ios(8.3));
- (void)setBuffer:(nullable id<MTLBuffer>)buffer offset:(NSUInteger)offset atIndex:(NSUInteger)index;
- (void)dispatchThreadgroups:(MTLSize)threadgroupsPerGrid threadsPerThreadgroup:(MTLSize)threadsPerThreadgroup;
@end

// --- MTLCommandBuffer.h --------------------------------------------------------------------------
enum MTLCommandBufferStatus : NSUInteger {
    MTLCommandBufferStatusCompleted = 4,
};

enum MTLDispatchType : NSUInteger {
    MTLDispatchTypeSerial = 0,
} API_AVAILABLE(macos(10.14), ios(12.0));

@protocol MTLCommandBuffer <NSObject>
@property (readonly) CFTimeInterval GPUStartTime API_AVAILABLE(macos(10.15), macCatalyst(13.0), ios(10.3));
@property (readonly) CFTimeInterval GPUEndTime API_AVAILABLE(macos(10.15), macCatalyst(13.0), ios(10.3));
- (void)commit;
- (void)waitUntilCompleted;
@property (readonly) MTLCommandBufferStatus status;
@property (nullable, readonly) NSError *error;
- (nullable id<MTLComputeCommandEncoder>)computeCommandEncoderWithDispatchType:(MTLDispatchType)dispatchType
    API_AVAILABLE(macos(10.14), ios(12.0));
@end

// --- MTLCommandQueue.h ---------------------------------------------------------------------------
@protocol MTLCommandQueue <NSObject>
- (nullable id<MTLCommandBuffer>)commandBuffer;
- (nullable id<MTLCommandBuffer>)commandBufferWithUnretainedReferences;
@end

// --- MTLDevice.h ---------------------------------------------------------------------------------
#ifdef __cplusplus
extern "C"
#endif
id<MTLDevice> __nullable MTLCreateSystemDefaultDevice(void) API_AVAILABLE(macos(10.11), ios(8.0)) NS_RETURNS_RETAINED;

enum MTLGPUFamily : NSInteger {
    MTLGPUFamilyApple7 = 1007,
    MTLGPUFamilyApple8 = 1008,
} API_AVAILABLE(macos(10.15), ios(13.0));

@protocol MTLDevice <NSObject>
@property (nonnull, readonly) NSString *name;
@property (readonly) uint64_t recommendedMaxWorkingSetSize API_AVAILABLE(macos(10.12), macCatalyst(13.0), ios(16.0));
@property (readonly) NSUInteger currentAllocatedSize API_AVAILABLE(macos(10.13), ios(11.0));
- (nullable id<MTLCommandQueue>)newCommandQueue;
- (nullable id<MTLBuffer>)newBufferWithLength:(NSUInteger)length options:(MTLResourceOptions)options;
- (nullable id<MTLBuffer>)newBufferWithBytes:(const void *)pointer length:(NSUInteger)length options:(MTLResourceOptions)options;
- (nullable id<MTLBuffer>)newBufferWithBytesNoCopy:(void *)pointer
                                            length:(NSUInteger)length
                                           options:(MTLResourceOptions)options
                                       deallocator:(void (^__nullable)(void *pointer, NSUInteger length))deallocator;
- (nullable id<MTLLibrary>)newLibraryWithURL:(NSURL *)url error:(__autoreleasing NSError **)error API_AVAILABLE(macos(10.13), ios(11.0));
- (nullable id<MTLLibrary>)newLibraryWithSource:(NSString *)source
                                        options:(nullable MTLCompileOptions *)options
                                          error:(__autoreleasing NSError **)error;
- (nullable id<MTLComputePipelineState>)newComputePipelineStateWithFunction:(id<MTLFunction>)computeFunction
                                                                      error:(__autoreleasing NSError **)error;
- (BOOL)supportsFamily:(MTLGPUFamily)gpuFamily API_AVAILABLE(macos(10.15), ios(13.0));
@property (readonly) NSUInteger maxBufferLength API_AVAILABLE(macos(10.14), ios(12.0));
@end

NS_ASSUME_NONNULL_END
