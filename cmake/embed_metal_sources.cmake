# Embeds the Metal kernels (metal/*.metal) in a C++ header, so that MetalDevice can compile them at
# load (newLibraryWithSource) on a Mac that has no offline Metal compiler (only the Command Line
# Tools) and so no akunu.metallib. Run as a script:
#
#   cmake -DOUTPUT=<dir>/metal_embedded_sources.h [-DAKUNU_ROOT=<repo>] -P cmake/embed_metal_sources.cmake
#
# The .metal files are concatenated into one Metal source, as the Linux shim compiles them into one
# translation unit (tests/metal_shim/shim_kernels.cpp), with every local `#include "..."` line
# (metal/*.h and src/core/kernel_params.h, searched as `metal -I<repo>/metal -I<repo>/src` would)
# replaced by the file it names, once. The branches of `#if defined(__METAL_VERSION__)` / `#ifdef` /
# `#ifndef` that Apple's compiler would skip (the shim's) are dropped, and `#line` directives keep
# compile errors pointing at the original files.
#
# The header defines, in namespace akunu::metal:
#   kEmbeddedMetalSource[]  the source: adjacent raw string literals of at most 16 KB each
#                           (compilers limit the length of one literal)
# (Which kernels it defines is the kernel table's business, src/backend/metal/metal_kernels.cpp; several
# are stamped out by macros, one per weight dtype, so the text has no simple list of them.)
cmake_minimum_required(VERSION 3.18)

if(NOT OUTPUT)
  message(FATAL_ERROR "embed_metal_sources.cmake: pass -DOUTPUT=<header path>")
endif()
if(NOT AKUNU_ROOT)
  get_filename_component(AKUNU_ROOT "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
endif()

set(_piece_limit 16000)      # bytes per raw string literal
set(_delimiter "akunu_msl")  # R"akunu_msl( ... )akunu_msl"

# CMake lists split on ';' (except after '\' or inside [ ]): these characters travel as
# placeholders while a file is handled line by line, and are restored on output.
set(_semicolon "@AKUNU_SEMICOLON@")
set(_backslash "@AKUNU_BACKSLASH@")
set(_open_bracket "@AKUNU_OPEN_BRACKET@")
set(_close_bracket "@AKUNU_CLOSE_BRACKET@")

function(_protect text out_var)
  string(REPLACE "\\" "${_backslash}" text "${text}")
  string(REPLACE ";" "${_semicolon}" text "${text}")
  string(REPLACE "[" "${_open_bracket}" text "${text}")
  string(REPLACE "]" "${_close_bracket}" text "${text}")
  set(${out_var} "${text}" PARENT_SCOPE)
endfunction()

function(_restore text out_var)
  string(REPLACE "${_semicolon}" ";" text "${text}")
  string(REPLACE "${_open_bracket}" "[" text "${text}")
  string(REPLACE "${_close_bracket}" "]" text "${text}")
  string(REPLACE "${_backslash}" "\\" text "${text}")
  set(${out_var} "${text}" PARENT_SCOPE)
endfunction()

# The lines of a file as a list (protected).
function(_read_lines path out_var)
  file(READ "${path}" text)
  string(REPLACE "\r\n" "\n" text "${text}")
  string(REGEX REPLACE "\n$" "" text "${text}")
  _protect("${text}" text)
  string(REPLACE "\n" ";" lines "${text}")
  set(${out_var} "${lines}" PARENT_SCOPE)
endfunction()

# The file a local #include names, as the Metal compiler's -I<repo>/metal -I<repo>/src would find it.
function(_resolve_include name from_dir out_var)
  foreach(dir "${from_dir}" "${AKUNU_ROOT}/metal" "${AKUNU_ROOT}/src")
    if(EXISTS "${dir}/${name}" AND NOT IS_DIRECTORY "${dir}/${name}")
      get_filename_component(found "${dir}/${name}" ABSOLUTE)
      set(${out_var} "${found}" PARENT_SCOPE)
      return()
    endif()
  endforeach()
  set(${out_var} "" PARENT_SCOPE)
endfunction()

function(_emit line)
  set_property(GLOBAL APPEND_STRING PROPERTY AKUNU_EMBED_TEXT "${line}\n")
endfunction()

# Appends `path` to the source, inlining its local includes (each header once).
function(_inline_file path)
  file(RELATIVE_PATH shown "${AKUNU_ROOT}" "${path}")
  get_filename_component(dir "${path}" DIRECTORY)
  _read_lines("${path}" lines)
  _emit("#line 1 \"${shown}\"")
  # One entry per open #if: "take" / "skip" for a resolved __METAL_VERSION__ test (its #if, #else,
  # #endif lines dropped), "keep" for any other condition (passed through for the compiler).
  set(stack "")
  set(line_number 0)
  foreach(line IN LISTS lines)
    math(EXPR line_number "${line_number} + 1")
    set(active TRUE)
    if("skip" IN_LIST stack)
      set(active FALSE)
    endif()
    string(STRIP "${line}" stripped)
    if(stripped MATCHES "^#[ \t]*(if|ifdef|ifndef|elif|else|endif)([ \t(!]|$)")
      set(directive "${CMAKE_MATCH_1}")
      string(REGEX REPLACE "[ \t]+" " " condition "${stripped}")
      if(directive MATCHES "^if")
        if(condition MATCHES "^# ?(if defined ?\\(__METAL_VERSION__\\)|ifdef __METAL_VERSION__)$")
          list(APPEND stack "take")
        elseif(condition MATCHES "^# ?(if !defined ?\\(__METAL_VERSION__\\)|ifndef __METAL_VERSION__)$")
          list(APPEND stack "skip")
        else()
          list(APPEND stack "keep")
          if(active)
            _emit("${line}")
          endif()
        endif()
        continue()
      endif()
      list(LENGTH stack depth)
      if(depth EQUAL 0)
        message(FATAL_ERROR "${shown}:${line_number}: #${directive} without #if")
      endif()
      list(GET stack -1 top)
      if(directive STREQUAL "endif")
        list(REMOVE_AT stack -1)
        if(top STREQUAL "keep" AND active)
          _emit("${line}")
        endif()
      elseif(top STREQUAL "keep")
        if(active)
          _emit("${line}")
        endif()
      elseif(directive STREQUAL "else")
        list(REMOVE_AT stack -1)
        if(top STREQUAL "take")
          list(APPEND stack "skip")
        else()
          list(APPEND stack "take")
        endif()
      else()
        message(FATAL_ERROR "${shown}:${line_number}: #elif after an #if on __METAL_VERSION__: write #else + #if")
      endif()
      continue()
    endif()
    if(NOT active)
      continue()
    endif()
    if(stripped MATCHES "^#[ \t]*pragma[ \t]+once")
      continue()  # each header is inlined once anyway
    endif()
    if(stripped MATCHES "^#[ \t]*include[ \t]*\"([^\"]+)\"")
      set(name "${CMAKE_MATCH_1}")
      if("keep" IN_LIST stack)
        message(FATAL_ERROR "${shown}:${line_number}: a local #include inside an #if is not embedded faithfully")
      endif()
      _resolve_include("${name}" "${dir}" header)
      if(NOT header)
        message(FATAL_ERROR "${shown}:${line_number}: #include \"${name}\" not found in ${dir}, metal/ or src/")
      endif()
      get_property(seen GLOBAL PROPERTY AKUNU_EMBED_SEEN)
      if(NOT header IN_LIST seen)
        set_property(GLOBAL APPEND PROPERTY AKUNU_EMBED_SEEN "${header}")
        _inline_file("${header}")
        math(EXPR resume "${line_number} + 1")
        _emit("#line ${resume} \"${shown}\"")
      endif()
      continue()
    endif()
    _emit("${line}")
  endforeach()
  list(LENGTH stack depth)
  if(NOT depth EQUAL 0)
    message(FATAL_ERROR "${shown}: #if without #endif")
  endif()
endfunction()

# `text` (protected, lines ending in \n) as adjacent raw string literals of at most _piece_limit bytes.
function(_raw_literals text out_var)
  string(REGEX REPLACE "\n$" "" text "${text}")
  string(REPLACE "\n" ";" lines "${text}")
  set(literals "")
  set(piece "")
  set(piece_bytes 0)
  foreach(line IN LISTS lines)
    _restore("${line}" line)
    string(LENGTH "${line}" bytes)
    math(EXPR after "${piece_bytes} + ${bytes} + 1")
    if(after GREATER _piece_limit AND piece_bytes GREATER 0)
      string(APPEND literals "     R\"${_delimiter}(${piece})${_delimiter}\"\n")
      set(piece "")
      set(piece_bytes 0)
      math(EXPR after "${bytes} + 1")
    endif()
    string(APPEND piece "${line}\n")
    set(piece_bytes ${after})
  endforeach()
  string(APPEND literals "     R\"${_delimiter}(${piece})${_delimiter}\"")
  set(${out_var} "${literals}" PARENT_SCOPE)
endfunction()

file(GLOB metal_files "${AKUNU_ROOT}/metal/*.metal")
list(SORT metal_files)
if(NOT metal_files)
  message(FATAL_ERROR "embed_metal_sources.cmake: no .metal files in ${AKUNU_ROOT}/metal")
endif()

set_property(GLOBAL PROPERTY AKUNU_EMBED_TEXT "")
set_property(GLOBAL PROPERTY AKUNU_EMBED_SEEN "")
foreach(path IN LISTS metal_files)
  _inline_file("${path}")
endforeach()
get_property(text GLOBAL PROPERTY AKUNU_EMBED_TEXT)
if(text MATCHES "\\)${_delimiter}\"")
  message(FATAL_ERROR "metal/ contains the raw string delimiter )${_delimiter}\"")
endif()
_raw_literals("${text}" literals)

set(header "// Generated by cmake/embed_metal_sources.cmake from metal/*.metal: do not edit.
// The Metal kernels as one source, for MetalDevice to compile at load where the build made no
// akunu.metallib (no offline Metal compiler).
#pragma once

namespace akunu::metal {

// metal/*.metal with their local #includes inlined: one self-contained Metal source.
inline constexpr char kEmbeddedMetalSource[] =
${literals};

}  // namespace akunu::metal
")

# Rewrite only on change, so that a build does not recompile the device for nothing.
if(EXISTS "${OUTPUT}")
  file(READ "${OUTPUT}" previous)
  if(previous STREQUAL header)
    return()
  endif()
endif()
file(WRITE "${OUTPUT}" "${header}")
