# AKUNU_SANITIZE: a checking build of the engine and the Python module under AddressSanitizer and
# UndefinedBehaviorSanitizer (docs/adr/0023-sanitizer-build.md; run by tools/sanitizer_tests.sh).
#
#   -C cmake.define.AKUNU_SANITIZE=address,undefined
#
# akunu_sanitize(<target>) instruments one target's C++ and links the sanitizer runtimes:
#   -fsanitize=...              the checks
#   -fno-sanitize-recover=all   a UBSan finding aborts instead of printing and going on, so a test fails
#   -fno-omit-frame-pointer -g  whole stack traces with file:line in every report
#   -O1                         after the build type's -O3 (the last -O wins): fast enough to run the
#                               tests, little enough inlining that reports point at the right frame
# AKUNU_NATIVE and the other build options still apply. Python itself is not instrumented, so the
# ASan runtime has to be loaded first (LD_PRELOAD): tools/sanitizer_tests.sh sets that up.

set(AKUNU_SANITIZE "" CACHE STRING "Sanitizers for the engine and the Python module: address, undefined or address,undefined (empty: none)")

if(AKUNU_SANITIZE)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    message(FATAL_ERROR "AKUNU_SANITIZE=${AKUNU_SANITIZE} needs GCC or Clang, not ${CMAKE_CXX_COMPILER_ID}")
  endif()
  # Only the two that work inside an uninstrumented CPython: ThreadSanitizer and MemorySanitizer
  # need every library of the process instrumented, or they report false positives.
  string(REPLACE "," ";" _akunu_sanitizer_list "${AKUNU_SANITIZE}")
  foreach(_akunu_sanitizer IN LISTS _akunu_sanitizer_list)
    if(NOT _akunu_sanitizer MATCHES "^(address|undefined)$")
      message(FATAL_ERROR "AKUNU_SANITIZE=${AKUNU_SANITIZE}: unknown or unsupported sanitizer "
                          "'${_akunu_sanitizer}' (use address, undefined or address,undefined)")
    endif()
  endforeach()
  message(STATUS "akunu: sanitizer build (-fsanitize=${AKUNU_SANITIZE} -O1 -g)")
endif()

function(akunu_sanitize target)
  if(NOT AKUNU_SANITIZE)
    return()
  endif()
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${AKUNU_SANITIZE} -fno-sanitize-recover=all -fno-omit-frame-pointer -g -O1>)
  target_link_options(${target} PRIVATE -fsanitize=${AKUNU_SANITIZE})
  # akunu._testing.sanitizers() reports it; the self-test's bugs are compiled only with it.
  target_compile_definitions(${target} PRIVATE AKUNU_SANITIZE_BUILD="${AKUNU_SANITIZE}")
endfunction()
