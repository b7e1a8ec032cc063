/* Included by memtraced.bpf.c (its maps and helpers): the programs on an in-process
 * sampler's USDT probes. */
/* ---- An in-process sampler (ours, placed by --inject, or one the program carries) ----
 * It has already sampled: otel_memory:alloc(ptr, size, weight) fires only for sampled blocks,
 * weight = nsamples * the sampler's mean gap in bytes (the tracer starts ours with mean_gap),
 * and otel_memory:free(ptr) only for frees of sampled blocks. The registers and the stack are
 * those of the probe site inside the sampler: the unwinder hides the sampler's frames. */
SEC("usdt")
int BPF_USDT(usdt_alloc, __u64 ptr, __u64 size, __u64 weight)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 owner;
	struct mt_counts *c;
	if (!ptr || !slot_of_tgid(id >> 32, &owner, &c))
		return 0;
	__sync_fetch_and_add(&c->alloc_calls, 1);
	__u64 gap = sample_all ? 8 : mean_gap;
	__u64 n = gap ? (weight + gap / 2) / gap : 0;
	__u32 key = 0;
	struct inflight_call *call = bpf_map_lookup_elem(&call_scratch, &key);
	if (!call)
		return 0;
	copy_entry_regs(call->regs, ctx);
	call->entry_sp = PT_REGS_SP(ctx);
	call->size = size;
	call->nsamples = n ? n : 1;
	call->fn = MT_FN_MALLOC;
	emit_alloc(ctx, c, owner, id, call, ptr, KIND_SAMPLER);
	return 0;
}

SEC("usdt")
int BPF_USDT(usdt_free, __u64 ptr)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 owner;
	struct mt_counts *c;
	if (!slot_of_tgid(id >> 32, &owner, &c))
		return 0;
	__sync_fetch_and_add(&c->free_calls, 1);
	struct mt_live_key key = {.addr = ptr, .owner = owner};
	struct mt_live_block *block = bpf_map_lookup_elem(&live, &key);
	if (!block)
		return 0;
	__u64 seq = block->seq;
	if (bpf_map_delete_elem(&live, &key))
		return 0;
	emit_free(c, owner, id, seq, ptr);
	return 0;
}

