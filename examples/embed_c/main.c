/* The smallest app linking libtern: load a model, run a few byte tokens, print the most likely next byte. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tern/tern.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: embed_c MODEL.tern TEXT\n");
    return 2;
  }
  tern_model* model = NULL;
  if (tern_model_load(argv[1], &model) != TERN_OK) {
    fprintf(stderr, "embed_c: %s\n", tern_last_error());
    return 1;
  }
  tern_session* session = NULL;
  if (tern_session_create(model, NULL, &session) != TERN_OK) {
    fprintf(stderr, "embed_c: %s\n", tern_last_error());
    tern_model_free(model);
    return 1;
  }
  int64_t n = (int64_t)strlen(argv[2]), vocab = tern_session_vocab_size(session);
  int32_t* ids = malloc(sizeof(int32_t) * (size_t)(n > 0 ? n : 1));
  float* logits = malloc(sizeof(float) * (size_t)((n > 0 ? n : 1) * vocab));
  for (int64_t i = 0; i < n; ++i) ids[i] = (unsigned char)argv[2][i];
  int rc = 0;
  if (tern_session_forward(session, ids, n, logits) != TERN_OK) {
    fprintf(stderr, "embed_c: %s\n", tern_session_last_error(session));
    rc = 1;
  } else {
    const float* last = logits + (n - 1) * vocab;
    int64_t best = 0;
    for (int64_t v = 1; v < vocab; ++v)
      if (last[v] > last[best]) best = v;
    printf("most likely next byte after \"%s\": %lld", argv[2], (long long)best);
    if (best >= 32 && best < 127) printf(" '%c'", (char)best);
    printf("\n");
  }
  free(ids);
  free(logits);
  tern_session_free(session);
  tern_model_free(model);
  return rc;
}
