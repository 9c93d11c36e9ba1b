/* SPDX-License-Identifier: MIT */
/* The smallest app linking libtern: load a byte-level model, turn a prompt into ids, and generate a few tokens with
 * the library's sampler and generator, printing each token's text as it comes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tern/tern.h"

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) {
    fprintf(stderr, "usage: embed_c MODEL.tern PROMPT [TOKENS]\n");
    return 2;
  }
  const int64_t tokens = argc == 4 ? atoll(argv[3]) : 40;
  tern_model* model = NULL;
  tern_session* session = NULL;
  tern_sampler* sampler = NULL;
  tern_generator* generator = NULL;
  int32_t* ids = NULL;
  int rc = 1;
  if (tern_model_load(argv[1], &model) != TERN_OK || tern_session_create(model, NULL, &session) != TERN_OK) {
    fprintf(stderr, "embed_c: %s\n", tern_last_error());
    goto done;
  }

  /* Text -> ids: a size query, then the ids. */
  const size_t len = strlen(argv[2]);
  int64_t n = 0;
  if (tern_tokenize(model, argv[2], len, NULL, 0, &n) != TERN_OK || n < 1) {
    fprintf(stderr, "embed_c: %s\n", n < 1 ? "the prompt is empty" : tern_last_error());
    goto done;
  }
  ids = malloc(sizeof(int32_t) * (size_t)n);
  if (!ids || tern_tokenize(model, argv[2], len, ids, n, &n) != TERN_OK) goto done;

  /* Sampling: temperature 0.8 among the 40 most likely tokens, a fixed seed. */
  tern_sampler_options so;
  tern_sampler_options_init(&so);
  so.temperature = 0.8f;
  so.top_k = 40;
  so.seed = 42;
  tern_generator_options go;
  tern_generator_options_init(&go); /* TERN_CONTEXT_SLIDE: keep half the context when it is full */
  if (tern_sampler_create(&so, &sampler) != TERN_OK || tern_generator_create(session, &go, &generator) != TERN_OK) {
    fprintf(stderr, "embed_c: %s\n", tern_last_error());
    goto done;
  }
  int64_t kept = 0;
  if (tern_generator_prompt(generator, ids, n, &kept) != TERN_OK) {
    fprintf(stderr, "embed_c: %s\n", tern_generator_last_error(generator));
    goto done;
  }
  printf("%s", argv[2]);
  int64_t bytes = 0;
  for (int64_t t = 0; t < tokens; ++t) {
    int32_t token;
    char text[16];
    size_t text_len = 0;
    if (tern_generator_next(generator, sampler, &token) != TERN_OK) {
      fprintf(stderr, "\nembed_c: %s\n", tern_generator_last_error(generator));
      goto done;
    }
    if (tern_token_to_text(model, token, text, sizeof text, &text_len) != TERN_OK) {
      fprintf(stderr, "\nembed_c: %s\n", tern_last_error());
      goto done;
    }
    fwrite(text, 1, text_len, stdout);
    bytes += (int64_t)text_len;
  }
  printf("\n\nembed_c: %lld prompt tokens (%lld fed), %lld tokens generated (%lld bytes of text)\n", (long long)n,
         (long long)kept, (long long)tokens, (long long)bytes);
  rc = 0;

done:
  free(ids);
  tern_generator_free(generator); /* before the session it borrows */
  tern_sampler_free(sampler);
  tern_session_free(session);
  tern_model_free(model);
  return rc;
}
