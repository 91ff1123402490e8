"""The order of global loads and PDL waits in each kernel of a cubin, without a GPU or a disassembler.

    nvcc -std=c++17 --expt-relaxed-constexpr -arch=sm_90a -O3 -Isrc -I. -cubin cuda/gemm.cu -o /tmp/gemm.cubin
    python3 tools/cuda_kernel_trace/sass_order.py /tmp/gemm.cubin 'q16.*Q4_0' 12

prints, per kernel whose mangled name matches the pattern, its first N global loads (LDG) and
griddepcontrol.waits (ACQ, SASS ACQBULK) in program order, then its instruction count. Hopper
instructions are 128 bits with the opcode in the low 12 bits; 0x981 (LDG, any width) and 0x82e
(ACQBULK) were read off `cuobjdump -sass` of sm_90a code (a kernel with one load and one wait, with
and without the wait). The machine with nvcc has no cuobjdump; the device does, for the full listing.
"""
import re
import struct
import sys

OPCODES = {0x981: "LDG", 0x82E: "ACQ"}


def kernels(path):
    """(mangled name, [low 64 bits of each instruction]) for every .text section of an ELF64 cubin."""
    data = open(path, "rb").read()
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names_at = sections[shstrndx][4]

    def name(offset):
        end = data.index(b"\0", names_at + offset)
        return data[names_at + offset:end].decode()

    for name_off, _type, _flags, _addr, offset, size in sections:
        section = name(name_off)
        if section.startswith(".text."):
            yield section[len(".text."):], [struct.unpack_from("<Q", data, offset + j)[0] for j in range(0, size, 16)]


def main():
    path, pattern = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else ""
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 12
    for kernel, words in kernels(path):
        if pattern and not re.search(pattern, kernel):
            continue
        ops = [OPCODES[w & 0xFFF] for w in words if (w & 0xFFF) in OPCODES][:n]
        print(" ".join(ops), "|", len(words), kernel)


if __name__ == "__main__":
    main()
