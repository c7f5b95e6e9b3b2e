/* The native linear's two multi-row kernels side by side, per instruction-set variant: the in_out
   broadcast kernel on a transposed weight (native_gemv.h, the linear's path before issue 26, still
   the RNN products') and the packed-panel kernel (native_packed.h). "hot": one weight, reused;
   "stream": copies of it (256 MB in all) used in turn, so each call reads it from memory.

       cc -O3 -ffp-contract=fast -I kernels -o /tmp/packed_vs_in_out benchmarks/gemm/packed_vs_in_out.c && /tmp/packed_vs_in_out
*/
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "linear/native_packed.h"
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){
  int sp[][3]={{16,512,512},{64,512,512},{16,512,2048},{64,512,2048},{16,2048,512},{64,2048,512},{256,512,2048}};
  for(int isa=2;isa>=1;isa--){ sj_gemv_isa=isa;
  for(int s=0;s<7;s++){int M=sp[s][0],K=sp[s][1],N=sp[s][2];
    for(int stream=0;stream<2;stream++){
    long per=(long)sj_panels(N)*K*32; int nc=stream?(int)((256L<<20)/(per*4)):1; if(nc<1)nc=1;
    float*x=calloc(M*K,4),*y=calloc((long)M*N,4),*wp=aligned_alloc(64,4L*per*nc),*wt=aligned_alloc(64,4L*per*nc);
    for(long i=0;i<per*nc;i++){wp[i]=1e-3f;wt[i]=1e-3f;}
    double bp=1e9,bo=1e9;int it=0;
    for(int r=0;r<20;r++){double t0=now();sj_packed_rows(x,K,M,wp+per*(it%nc),K,N,NULL,y,N,0,sj_panels(N));double dt=now()-t0;if(dt<bp)bp=dt;
      t0=now();sj_gemv_rows_in_out(x,K,M,wt+per*(it%nc),K,N,NULL,y,N,0,N);dt=now()-t0;if(dt<bo)bo=dt;it++;}
    printf("isa %d %s M %3d K %4d N %4d: in_out %6.1f  packed %6.1f GFLOP/s\n",isa,stream?"stream":"hot   ",M,K,N,2.0*M*K*N/bo/1e9,2.0*M*K*N/bp/1e9);
    free(wp);free(wt);free(x);free(y);}}}
}
