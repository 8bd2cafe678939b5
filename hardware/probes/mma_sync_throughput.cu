#include <cstdio>
#include <vector>
#include <algorithm>
#define MMA(INSTR) asm volatile(INSTR " {%0,%1,%2,%3},{%4,%5,%6,%7},{%8,%9},{%0,%1,%2,%3};" \
  : "+f"(d[c][0]), "+f"(d[c][1]), "+f"(d[c][2]), "+f"(d[c][3]) \
  : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]))
#define MMA8(INSTR) asm volatile(INSTR " {%0,%1,%2,%3},{%4,%5},{%6},{%0,%1,%2,%3};" \
  : "+f"(d[c][0]), "+f"(d[c][1]), "+f"(d[c][2]), "+f"(d[c][3]) \
  : "r"(a[0]), "r"(a[1]), "r"(b[0]))
template <int T> __global__ void __launch_bounds__(1024, 1) k(float* o, long long* cy, int it) {
  unsigned x = threadIdx.x * 2654435761u, a[4], b[2];
  const unsigned one = T == 3 ? 0x3f800000u : T == 2 ? 0x38383838u
                       : (T == 0 || T == 4) ? 0x3f803f80u : 0x3c003c00u;
  for (int i = 0; i < 4; i++) a[i] = one ^ ((x >> (i + 3)) & 0x00070007u);
  for (int i = 0; i < 2; i++) b[i] = one ^ ((x >> (i + 9)) & 0x00030003u);
  float d[8][4] = {};
  __syncthreads();
  long long t = clock64();
  for (int n = 0; n < it; n++) {
#pragma unroll
    for (int c = 0; c < 8; c++) {
      if (T == 0) MMA("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32");
      if (T == 1) MMA("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32");
      if (T == 2) MMA("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32");
      if (T == 3) MMA("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32");
      if (T == 4) MMA8("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32");
      if (T == 5) MMA8("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32");
    }
  }
  __syncthreads();
  t = clock64() - t;
  float s = 0;
  for (int c = 0; c < 8; c++) for (int i = 0; i < 4; i++) s += d[c][i];
  if (s == 1.2345f) o[0] = s;
  if (threadIdx.x == 0) cy[blockIdx.x] = t;
}
template <int T> void run(const char* name, double flop_per_mma, int sms) {
  float* o; long long* cy; cudaMalloc(&o, 4); cudaMalloc(&cy, sms * 8);
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  const int it = 8192;
  for (int w : {4, 8, 16, 32}) {
    for (int r = 0; r < 3; r++) k<T><<<sms, 32 * w>>>(o, cy, it);  // warm-up
    cudaEventRecord(e0); k<T><<<sms, 32 * w>>>(o, cy, it); cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms; cudaEventElapsedTime(&ms, e0, e1);
    std::vector<long long> c(sms); cudaMemcpy(c.data(), cy, sms * 8, cudaMemcpyDeviceToHost);
    std::sort(c.begin(), c.end());
    double per_block = double(w) * it * 8 * flop_per_mma;
    printf("%-9s warps/SM=%2d  FLOP/clk/SM median=%7.1f min=%7.1f  TFLOP/s=%6.1f  implied clock=%5.0f MHz  err=%s\n",
           name, w, per_block / c[sms / 2], per_block / c[sms - 1], per_block * sms / (ms * 1e-3) / 1e12,
           c[sms / 2] / (ms * 1e3), cudaGetErrorString(cudaGetLastError()));
  }
}
int main() {
  cudaDeviceProp p; cudaGetDeviceProperties(&p, 0);
  printf("%s  SMs=%d  cc=%d.%d\n", p.name, p.multiProcessorCount, p.major, p.minor);
  run<0>("bf16", 16 * 8 * 16 * 2, p.multiProcessorCount);
  run<1>("fp16", 16 * 8 * 16 * 2, p.multiProcessorCount);
  run<2>("fp8e4m3", 16 * 8 * 32 * 2, p.multiProcessorCount);
  run<3>("tf32", 16 * 8 * 8 * 2, p.multiProcessorCount);
  run<4>("bf16k8", 16 * 8 * 8 * 2, p.multiProcessorCount);
  run<5>("fp16k8", 16 * 8 * 8 * 2, p.multiProcessorCount);
}
