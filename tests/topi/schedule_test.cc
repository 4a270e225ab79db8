// The topi CPU schedules: loop structure of the lowered code (inlining, vectorized inner loop,
// parallel outer loop, reductions placed at the row loop), plus a timing print comparing the
// default and topi schedules on a larger case (printed only; never asserted).
#include <gtest/gtest.h>

#include <chrono>

#include "kiln/topi/broadcast.h"
#include "kiln/topi/elemwise.h"
#include "kiln/topi/nn_norm.h"
#include "kiln/topi/nn_util.h"
#include "kiln/topi/reduction.h"
#include "kiln/topi/transform.h"
#include "topi/topi_test_util.h"

namespace kiln::topi::testing {
namespace {

std::string lowered(const te::Schedule& s, const std::vector<te::Tensor>& args) {
  return tir::to_string(lower(s, args, "f"));
}

int count(const std::string& s, const std::string& part) {
  int n = 0;
  for (size_t p = s.find(part); p != std::string::npos; p = s.find(part, p + 1)) ++n;
  return n;
}

TEST(TopiSchedule, InjectiveInlinesAndVectorizes) {
  te::Tensor A = input({64, 97}, f32, "A"), B = input({97}, f32, "B");
  te::Tensor C = relu(add(A, B));
  std::string ir = lowered(schedule_injective({C}, host_target()), {A, B, C});
  EXPECT_EQ(count(ir, "parallel for"), 1) << ir;
  EXPECT_EQ(ir.find("add["), std::string::npos) << ir;   // the add stage is inlined
  EXPECT_NE(ir.find("ramp("), std::string::npos) << ir;  // vector accesses
  // Small outputs stay serial.
  te::Tensor S = input({3, 5}, f32, "S");
  te::Tensor T = exp(S);
  std::string small = lowered(schedule_injective({T}, host_target()), {S, T});
  EXPECT_EQ(count(small, "parallel"), 0) << small;
}

TEST(TopiSchedule, FewLongRowsShareTheirVectorsBetweenThreads) {
  // A GroupNorm's [N, 1, C*H*W] view, N = 2: the two rows alone would keep a thread idle, so
  // the rows' vectors are one parallel loop with them.
  te::Tensor A = input({2, 1, 3000}, f32, "A"), M = input({2, 1, 1}, f32, "M");
  te::Tensor C = subtract(A, M);
  std::string ir = lowered(schedule_injective({C}, host_target()), {A, M, C});
  const int lanes = host_target().vector_bits() / 32;
  EXPECT_NE(ir.find("parallel for (i.j.fused.k.outer.fused, 0, " +
                    std::to_string(2 * ((3000 + lanes - 1) / lanes)) + ")"),
            std::string::npos)
      << ir;
  NDArray a = random_array({2, 1, 3000}, f32, 5), m = random_array({2, 1, 1}, f32, 6);
  NDArray want =
      reference({2, 1, 3000}, f32, [&](const Shape& i) { return at(a, i) - bcast_at(m, i); });
  check({A, M}, {C}, {a, m}, {want});
}

TEST(TopiSchedule, HalfVectorChannelBlockIsTheVector) {
  // A squeeze-and-excitation scale on NCHW8c: the 8-channel block is the vector, so the
  // per-channel operand is one contiguous load (a 16-lane vector over the flattened axes would
  // index it with a division per lane: 2x slower in EfficientNet-B3).
  te::Tensor X = input({1, 5, 12, 12, 8}, f32, "X"), S = input({1, 5, 1, 1, 8}, f32, "S");
  te::Tensor Y = multiply(X, S);
  te::Schedule s = schedule_injective({Y}, host_target());
  std::string ir = lowered(s, {X, S, Y});
  EXPECT_NE(ir.find(", 1, 8)]"), std::string::npos) << ir;  // 8-lane contiguous accesses
  EXPECT_EQ(ir.find("floormod(ramp"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("floordiv(ramp"), std::string::npos) << ir;
  NDArray x = random_array({1, 5, 12, 12, 8}, f32, 3), sc = random_array({1, 5, 1, 1, 8}, f32, 4);
  NDArray want =
      reference({1, 5, 12, 12, 8}, f32, [&](const Shape& i) { return at(x, i) * bcast_at(sc, i); });
  check({X, S}, {Y}, {x, sc}, {want});
}

TEST(TopiSchedule, ChannelsReadAcrossBlocksOfAnotherWidthUnrollTheOutputBlocks) {
  // GhostNetV2's gate: 24 channels in blocks of 12 (two concatenated halves) multiplied into
  // blocks of 8. The three 8-channel blocks of a pixel are unrolled inside the pixel loop, so
  // the first and last read 8 contiguous channels of one 12-block and only the middle one
  // straddles two (the pixel loop around all three made every vector a gather computing each
  // lane's block and position: 4.9x slower).
  te::Tensor X = input({1, 2, 10, 10, 12}, f32, "X"), G = input({1, 3, 10, 10, 8}, f32, "G");
  te::Tensor Y = multiply(layout_transform(X, "NCHW12c", "NCHW8c"), G);
  const Target avx512("llvm -mcpu=skylake-avx512");
  std::string ir = lowered(schedule_injective({Y}, avx512), {X, G, Y});
  EXPECT_EQ(count(ir, "floordiv(ramp"), 1) << ir;
  EXPECT_NE(ir.find("for (i.k.fused.l.fused, 0, 100)"), std::string::npos) << ir;
  NDArray x = random_array({1, 2, 10, 10, 12}, f32, 8), g = random_array({1, 3, 10, 10, 8}, f32, 9);
  NDArray want = reference({1, 3, 10, 10, 8}, f32, [&](const Shape& i) {
    const int64_t c = i[1] * 8 + i[4];
    return at(x, {0, c / 12, i[2], i[3], c % 12}) * at(g, i);
  });
  check({X, G}, {Y}, {x, g}, {want});
}

TEST(TopiSchedule, ChannelBlocksAreWholeOrHalfVectors) {
  // The largest power of two up to the lanes when it is at least half of them, else the largest
  // divisor (narrow squeeze-and-excitation convolutions).
  EXPECT_EQ(channel_block(64, 16), 16);
  EXPECT_EQ(channel_block(144, 16), 16);
  EXPECT_EQ(channel_block(40, 16), 8);   // not 10
  EXPECT_EQ(channel_block(24, 16), 8);   // not 12
  EXPECT_EQ(channel_block(232, 16), 8);  // 8 x 29
  EXPECT_EQ(channel_block(10, 16), 10);
  EXPECT_EQ(channel_block(6, 16), 6);
  EXPECT_EQ(channel_block(3, 16), 3);
  EXPECT_EQ(channel_block(24, 8), 8);
  EXPECT_EQ(channel_block(12, 8), 4);
  EXPECT_EQ(channel_block(40, 4), 4);
}

TEST(TopiSchedule, RowReductionTailIsSplitOff) {
  // A softmax over rows of 197 (ViT's attention): the 12 whole 16-lane blocks of each row are
  // plain vector loads, the 13th alone masked (the guard was on every block, and the clamped
  // index min(ramp, 196) a gather: the kernel ran 2.1x slower).
  te::Tensor X = input({6, 197}, f32, "X");
  te::Tensor S = softmax(X, -1);
  te::Schedule s = schedule_softmax({S}, host_target());
  std::string ir = lowered(s, {X, S});
  EXPECT_EQ(ir.find("min(ramp"), std::string::npos) << ir;
  EXPECT_GE(count(ir, "for (ko"), 2) << ir;
  EXPECT_NE(ir.find(", 0, 12)"), std::string::npos) << ir;
  NDArray x = random_array({6, 197}, f32, 8, -4, 4);
  NDArray want = reference({6, 197}, f32, [&](const Shape& i) {
    double mx = -1e30, sum = 0;
    for (int64_t k = 0; k < 197; ++k) mx = std::max(mx, at(x, {i[0], k}));
    for (int64_t k = 0; k < 197; ++k) sum += std::exp(at(x, {i[0], k}) - mx);
    return std::exp(at(x, i) - mx) / sum;
  });
  check({X}, {S}, {x}, {want}, schedule_softmax, {1e-5, 1e-7});
}

TEST(TopiSchedule, BoolOutputsAreNotVectorized) {  // computed bools stay scalar
  te::Tensor A = input({40, 33}, f32, "A"), B = input({33}, f32, "B");
  te::Tensor C = less(A, B);
  std::string ir = lowered(schedule_injective({C}, host_target()), {A, B, C});
  EXPECT_EQ(ir.find("ramp("), std::string::npos) << ir;
}

TEST(TopiSchedule, BoolInputsDoNotStopVectorizing) {
  // GPT-2's causal mask: where(mask[s, s], scores[h, s, s], fill). The mask is loaded byte-wise
  // as a vector (it ran as a scalar loop with divisions per element: 3.3 ms -> 0.47 ms).
  te::Tensor M = input({48, 48}, boolean, "M"), X = input({3, 48, 48}, f32, "X");
  te::Tensor F = input({}, f32, "F");
  te::Tensor Y = where(M, X, F);
  std::string ir = lowered(schedule_injective({Y}, host_target()), {M, X, F, Y});
  EXPECT_NE(ir.find("M[ramp("), std::string::npos) << ir;
  NDArray m = random_array({48, 48}, boolean, 5), x = random_array({3, 48, 48}, f32, 6);
  NDArray f = random_array({}, f32, 7);
  NDArray want = reference({3, 48, 48}, f32, [&](const Shape& i) {
    return bcast_at(m, i) != 0 ? at(x, i) : element(f, 0);
  });
  check({M, X, F}, {Y}, {m, x, f}, {want});
}

TEST(TopiSchedule, BlockingPlainChannelsVectorizesThePixels) {
  // NCHW -> NCHW16c: the 16 channels of a block are H·W apart in the input, so the kernel
  // loads rows of 16 pixels (contiguous) and stores them 16 apart, instead of gathering; 5x7
  // pixels leave a tail of 3. Through an NHWC -> NCHW transpose the channels are contiguous
  // already, and the block stays the vector.
  if (host_target().vector_bits() != 512) GTEST_SKIP() << "16-lane host only";
  te::Tensor X = input({2, 32, 5, 7}, f32, "X");
  te::Tensor Y = layout_transform(X, "NCHW", "NCHW16c");
  std::string ir = lowered(schedule_injective({Y}, host_target()), {X, Y});
  EXPECT_NE(ir.find("X[ramp("), std::string::npos) << ir;
  EXPECT_NE(ir.find(", 16, 16)] ="), std::string::npos) << ir;  // the store, 16 apart
  NDArray x = random_array({2, 32, 5, 7}, f32, 8);
  NDArray want = reference({2, 2, 5, 7, 16}, f32, [&](const Shape& i) {
    return at(x, {i[0], i[1] * 16 + i[4], i[2], i[3]});
  });
  check({X}, {Y}, {x}, {want});
  te::Tensor Z = input({1, 5, 7, 32}, f32, "Z");
  te::Tensor T = layout_transform(transpose(Z, {0, 3, 1, 2}), "NCHW", "NCHW16c");
  std::string ir2 = lowered(schedule_injective({T}, host_target()), {Z, T});
  EXPECT_EQ(ir2.find(", 16, 16)] ="), std::string::npos) << ir2;
  EXPECT_NE(ir2.find(", 1, 16)] ="), std::string::npos) << ir2;
}

TEST(TopiSchedule, ReduceVectorizesOuterAxisReduction) {
  te::Tensor A = input({64, 97}, f32, "A");
  te::Tensor R0 = sum(A, {0});  // spatial inner axis is contiguous: vectorize it
  std::string ir0 = lowered(schedule_reduce({R0}, host_target()), {A, R0});
  EXPECT_NE(ir0.find("ramp("), std::string::npos) << ir0;
  EXPECT_EQ(count(ir0, "parallel for"), 1) << ir0;
  // Innermost reduced: parallel rows, each summed in 16 vector lanes (a lane partial over
  // k = ko*16 + v, the last partial block shifted inwards), then the lanes in a tree.
  te::Tensor R1 = sum(A, {1});
  std::string ir1 = lowered(schedule_reduce({R1}, host_target()), {A, R1});
  EXPECT_NE(ir1.find("sum.partial[ramp("), std::string::npos) << ir1;
  EXPECT_EQ(count(ir1, "parallel for"), 1) << ir1;
  EXPECT_LT(ir1.find("parallel for"), ir1.find("for (ko, 0, 6)")) << ir1;
  EXPECT_NE(ir1.find("kiln.vector_slice"), std::string::npos) << ir1;
  // Rows shorter than a vector keep one serial stage.
  te::Tensor B = input({64, 12}, f32, "B");
  te::Tensor R2 = sum(B, {1});
  std::string ir2 = lowered(schedule_reduce({R2}, host_target()), {B, R2});
  EXPECT_EQ(ir2.find("ramp("), std::string::npos) << ir2;
}

TEST(TopiSchedule, EmbeddingBagSumVectorizesTheRowNotTheBag) {
  // sum over k of table[ids[b, k], d] (a recommender's embedding bag): the reduction runs along
  // the bag, the ids' contiguous axis, but reads the table's rows along d: d is vectorized
  // inside the loop over the bag (was: one scalar sum per output element).
  te::Tensor E = input({1000, 64}, f32, "E");
  te::Tensor ids = input({32, 20}, DataType::Int(32), "ids");
  te::Tensor R = sum(take(E, ids, 0), {1});
  const std::vector<te::Tensor> args = {E, ids, R};
  std::string ir = lowered(schedule_reduce({R}, host_target()), args);
  EXPECT_NE(ir.find("sum[ramp("), std::string::npos) << ir;
  NDArray table = random_array({1000, 64}, f32, 3),
          bag = random_array({32, 20}, DataType::Int(32), 4, 0, 999);
  NDArray want = reference({32, 64}, f32, [&](const Shape& i) {
    double acc = 0;
    for (int64_t k = 0; k < 20; ++k)
      acc += at(table, {static_cast<int64_t>(at(bag, {i[0], k})), i[1]});
    return acc;
  });
  check({E, ids}, {R}, {table, bag}, {want}, schedule_reduce);
}

TEST(TopiSchedule, SoftmaxAndLayerNormComputeAtRows) {
  te::Tensor X = input({64, 100}, f32, "X");
  te::Tensor S = softmax(X);
  std::string ir = lowered(schedule_softmax({S}, host_target()), {X, S});
  // One parallel row loop holding both reductions and the vectorized row.
  EXPECT_EQ(count(ir, "parallel for"), 1) << ir;
  size_t par = ir.find("parallel for");
  EXPECT_LT(par, ir.find("softmax.max")) << ir;
  // Both row reductions in vector lanes (two lane partials; storage reuse may give them one
  // buffer, and the row of exponentials another).
  EXPECT_EQ(count(ir, "[ramp(0, 1, 16)] = broadcast(-inf(float32), 16)"), 1) << ir;
  EXPECT_EQ(count(ir, "[ramp(0, 1, 16)] = broadcast(0f, 16)"), 1) << ir;
  EXPECT_EQ(count(ir, "for (ko"), 2) << ir;
  // exp(x - max) once per element, stored per row (one loop of 16-lane vectors, the last
  // shifted inwards to end at 100); the sum and the output read it.
  EXPECT_EQ(count(ir, "exp("), 1) << ir;
  te::Tensor G = input({100}, f32, "G"), B = input({100}, f32, "B");
  te::Tensor L = layer_norm(X, G, B);
  std::string irl = lowered(schedule_norm({L}, host_target()), {X, G, B, L});
  EXPECT_EQ(count(irl, "parallel for"), 1) << irl;
  EXPECT_NE(irl.find("ramp("), std::string::npos) << irl;
  EXPECT_EQ(count(irl, "partial[ramp(0, 1, 16)] = broadcast("), 2) << irl;
}

TEST(TopiSchedule, ErrorsNameTheStage) {
  te::Tensor A = input({4, 4}, f32, "A");
  te::Tensor R = sum(A, {1});
  EXPECT_NE(error_of([&] { schedule_injective({R}, host_target()); })
                .find("schedule_injective: output 'sum' (tag 'comm_reduce,sum') is not an "
                      "injective compute"),
            std::string::npos);
}

double time_ms(const te::Schedule& s, const std::vector<te::Tensor>& args,
               const std::vector<NDArray>& arrays) {
  runtime::Module m = build(s, args, host_target(), "f");
  runtime::PackedFunc f = m.get_function("f");
  call(f, arrays);  // warm up
  double best = 1e30;
  for (int r = 0; r < 5; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    call(f, arrays);
    auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  return best;
}

TEST(TopiSchedule, TimingPrint) {
  const int64_t n = 512, m = 1024;
  te::Tensor A = input({n, m}, f32, "A"), B = input({m}, f32, "B");
  te::Tensor C = gelu(add(A, B));
  te::Tensor S = softmax(A);
  NDArray a = random_array({n, m}, f32, 1), b = random_array({m}, f32, 2),
          c = poisoned({n, m}, f32), sm = poisoned({n, m}, f32);
  double d0 = time_ms(te::create_schedule({C}), {A, B, C}, {a, b, c});
  double d1 = time_ms(schedule_injective({C}, host_target()), {A, B, C}, {a, b, c});
  double s0 = time_ms(te::create_schedule({S}), {A, S}, {a, sm});
  double s1 = time_ms(schedule_softmax({S}, host_target()), {A, S}, {a, sm});
  std::printf("gelu(add) %lldx%lld: default %.3f ms, topi %.3f ms\n", static_cast<long long>(n),
              static_cast<long long>(m), d0, d1);
  std::printf("softmax   %lldx%lld: default %.3f ms, topi %.3f ms\n", static_cast<long long>(n),
              static_cast<long long>(m), s0, s1);
}

}  // namespace
}  // namespace kiln::topi::testing
