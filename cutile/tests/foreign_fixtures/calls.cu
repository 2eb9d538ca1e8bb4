// Tile C++ oracle for foreign declarations and calls (see README.md for the command).
// in-only operand, no result
__experimental_foreign_decl__ __experimental_foreign_name__("ext_in") __tile__ void ext_in(float x);
// two in operands and one result (an output-only operand, passed zero-filled)
__experimental_foreign_decl__ __experimental_foreign_name__("ext_ret") __tile__ float ext_ret(float x, int y);
// constant arguments: an index and a datatype
template <long N, typename T>
__experimental_foreign_decl__ __experimental_foreign_name__("ext_nt") __tile__ float ext_nt(float x, int y);

__tile_global__ void k(float x, int y) {
  ext_in(x);
  float a = ext_ret(x, y);
  float b = ext_nt<8, short>(a, y);
  ext_in(b);
}
